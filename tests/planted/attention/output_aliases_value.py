"""Planted bug: with a single key the softmax weight is 1, so the kernel takes a fast path and
returns the value itself, broadcast over the queries (``value.expand(...)``): the output is a view
of the caller's value tensor, and the caller's next in-place op on one changes the other.

Real pattern: decode-time fast paths (``S == 1``) that return a view instead of new memory.
Caught by: attention.layouts (and the output-aliasing check of every call).
Message: shares the memory of its argument 2
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        if key.shape[-2] == 1 and attn_mask is None and not dropout_p and query.shape[-3] == key.shape[-3] \
                and value.dtype == query.dtype:
            return value.expand(*value.shape[:-2], query.shape[-2], value.shape[-1])  # BUG: a view
        return super().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                    scale, enable_gqa)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
