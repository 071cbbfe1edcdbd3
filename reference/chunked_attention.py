"""Readable chunked local attention (Llama 4's ``attention_chunk_size``), computed in float64.

    query (B, H, L, E), key (B, H, S, E), value (B, H, S, Ev), L <= S, chunk >= 1
    output (B, H, L, Ev) in the query's dtype

The keys are cut into chunks of ``chunk`` positions (0 .. chunk - 1, chunk .. 2 chunk - 1, ...).
Queries are aligned to the end of the keys: row i is absolute position p = i + S - L and sees
exactly the keys j <= p with j // chunk == p // chunk, causally within its own chunk
(``reference.masks.chunk_mask``). A query at the start of a chunk sees one key; nothing of an
earlier chunk is ever seen, which is what tells it from a sliding window of the same size.
"""
from __future__ import annotations

import torch

from harness.reference.attention import attention_math
from harness.reference.masks import chunk_mask


def chunked_attention_math(query, key, value, chunk, scale=None, compute_dtype=torch.float64):
    L, S = query.shape[-2], key.shape[-2]
    mask = chunk_mask(L, S, chunk, device=query.device)  # (L, S)
    return attention_math(query, key, value, attn_mask=mask, scale=scale, compute_dtype=compute_dtype)


def chunked_attention(query, key, value, chunk, scale=None):
    """The protocol function: float64 math, cast back to the query's dtype."""
    return chunked_attention_math(query, key, value, chunk, scale).to(query.dtype)
