"""Planted bug: rows whose keys are all masked are "unmasked" (attend to every key)
to avoid NaN, so they return ordinary attention over the masked keys -- neither
zeros, NaN nor the uniform average.

Real pattern: Hugging Face's ``AttentionMaskConverter._unmask_unattended``, which
does exactly this before memory-efficient SDPA and relies on the caller ignoring
those rows. Caught by: attention.fully_masked_rows (matches no known convention).
Message: fully_masked_rows: the behaviour matches no known convention
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def apply_visibility(self, scores, visible):
        visible = visible | ~visible.any(dim=-1, keepdim=True)  # BUG: fully masked rows see all keys
        return super().apply_visibility(scores, visible)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
