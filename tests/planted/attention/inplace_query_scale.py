"""Planted bug: the query is scaled in place (``query.mul_(scale)``), modifying the
caller's tensor.

Real pattern: ``q *= self.scaling`` as a memory optimization (fairseq-style), moved
into a function that receives a tensor the caller still owns.
Caught by: attention.agreement (the guard reports "modified its input in place").
Message: implementation error
Message: modified its input in place
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        query.mul_(1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)  # BUG: in place
        return super().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
                                                    is_causal, 1.0, enable_gqa)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
