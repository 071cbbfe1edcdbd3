"""Planted bug: the causal mask hides the diagonal (triu with diagonal=0), so a
query cannot see its own key (and the first query sees nothing).

Real pattern: ``torch.triu(torch.ones(L, S), diagonal=0)`` instead of ``diagonal=1``
when building the "future" mask -- the classic causal-mask off-by-one of
from-scratch transformer code. Caught by: attention.causal (the measured
visibility matches no known alignment).
Message: convention mismatch
Message: matches no known convention
"""
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(rep, -3), value.repeat_interleave(rep, -3)
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query.float() @ key.float().transpose(-2, -1)) * scale
    L, S = scores.shape[-2:]
    if is_causal:
        hidden = torch.ones(L, S, dtype=torch.bool).triu(diagonal=0)  # BUG: should be diagonal=1
        scores = scores.masked_fill(hidden, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return (scores.softmax(-1).nan_to_num(0.0) @ value.float()).to(query.dtype)
