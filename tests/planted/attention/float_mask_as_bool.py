"""Planted bug: a float (additive) mask is treated as a 0/1 keep-mask: entries equal
to 0 are masked, every other entry (including -inf) is kept and its value ignored.

Real pattern: ``scores.masked_fill(mask == 0, float("-inf"))`` (the Annotated
Transformer idiom for 0/1 masks) applied to an additive mask such as the ones
Hugging Face passes to SDPA. Caught by: attention.float_mask.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def float_bias(self, attn_mask, scores):
        keep = attn_mask != 0  # BUG: an additive mask is not a 0/1 mask
        return torch.zeros(attn_mask.shape, dtype=scores.dtype, device=scores.device).masked_fill(
            ~keep, float("-inf"))


scaled_dot_product_attention = Planted().scaled_dot_product_attention
