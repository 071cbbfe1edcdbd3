"""Planted bug: a boolean mask is read as True = masked out.

Real pattern: mixing up nn.MultiheadAttention's ``key_padding_mask`` / ``attn_mask``
convention (True = ignore) with SDPA's (True = may attend) when switching a model
to ``F.scaled_dot_product_attention``. Caught by: attention.bool_mask.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def bool_visible(self, attn_mask, scores):
        return ~attn_mask  # BUG: True means "attend" in the SDPA contract


scaled_dot_product_attention = Planted().scaled_dot_product_attention
