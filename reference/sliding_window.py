"""Readable causal sliding-window attention, computed in float64.

    query (B, H, L, E), key (B, H, S, E), value (B, H, S, Ev), L <= S
    output (B, H, L, Ev) in the query's dtype

Queries are aligned to the end of the keys: row i is absolute position
p = i + S - L and sees exactly the keys p - window < j <= p (``window`` keys;
FlashAttention's window_size=(w, 0) sees w + 1, a named convention).
This is the dense O(L*S) formulation; ``harness.bench.models.banded`` is the O(n*w) one.
"""
from __future__ import annotations

import torch

from harness.reference.attention import attention_math
from harness.reference.masks import window_mask


def sliding_window_math(query, key, value, window, scale=None, extent="w",
                        compute_dtype=torch.float64):
    L, S = query.shape[-2], key.shape[-2]
    mask = window_mask(L, S, window, extent, device=query.device)  # (L, S)
    return attention_math(query, key, value, attn_mask=mask, scale=scale,
                          compute_dtype=compute_dtype)


def sliding_window_attention(query, key, value, window, scale=None):
    """The protocol function: float64 math, cast back to the query's dtype."""
    return sliding_window_math(query, key, value, window, scale).to(query.dtype)
