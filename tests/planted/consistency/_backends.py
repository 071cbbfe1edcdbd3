"""Two correct backends of one imaginary library, shared by the planted pair in this folder:
``eager.py`` and ``fused.py`` each pass the attention and RoPE suites alone, and disagree held to
each other (tests/test_consistency.py). Nothing here is wrong on its own.
"""
from __future__ import annotations

import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "positions"))
from _base import Rope  # noqa: E402  (Hugging Face-style rotate-half RoPE)


def sdpa_top_left(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                  enable_gqa=False):
    """torch's SDPA: with is_causal, query i sees keys j <= i (top-left)."""
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def sdpa_bottom_right(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                      enable_gqa=False):
    """FlashAttention >= 2.1's causal mask: query i sees keys j <= i + S - L (bottom-right)."""
    if is_causal:
        L, S = query.shape[-2], key.shape[-2]
        causal = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(S - L)
        attn_mask = causal if attn_mask is None else (attn_mask & causal if attn_mask.dtype == torch.bool
                                                      else attn_mask.masked_fill(~causal, float("-inf")))
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          scale=scale, enable_gqa=enable_gqa)


ROPE = Rope()
