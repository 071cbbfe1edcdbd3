"""Planted bug: a (B, 1, 1, S) key-padding mask is applied along the query axis (transposed to
(B, 1, S, 1)), so padded *queries* are hidden instead of padded keys; full (.., L, S) masks are
right. With L != S the transposed mask does not broadcast, so the kernel only "works" for L == S.

Real pattern: a kernel that normalises a 4-D mask with ``mask.transpose(-1, -2)`` assuming a
(B, H, S, L) layout, exercised only with full masks in its tests. Caught by: attention.mask_shapes.
Message: (B, 1, 1, S) key padding
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def bool_visible(self, attn_mask, scores):
        if attn_mask.dim() >= 3 and attn_mask.shape[-2] == 1 and attn_mask.shape[-1] == scores.shape[-2]:
            return attn_mask.transpose(-1, -2)  # BUG: the key axis read as the query axis
        return attn_mask


scaled_dot_product_attention = Planted().scaled_dot_product_attention
