"""Planted bug: a full-rank boolean mask (..., H, L, S) is reduced to its first batch
item, which is then broadcast over the whole batch.

Real pattern: padding masks built from ``attention_mask[0]`` (code written or traced
with batch size 1, e.g. generation fast paths and exported graphs), so every
sequence gets the first sequence's padding. Caught by: attention.bool_mask.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def bool_visible(self, attn_mask, scores):
        if attn_mask.dim() == scores.dim():
            return attn_mask[:1]  # BUG: only the first batch item's mask is used
        return attn_mask


scaled_dot_product_attention = Planted().scaled_dot_product_attention
