"""Readable scaled dot-product attention, computed in float64.

    Attention(Q, K, V) = softmax(Q K^T * scale + bias) V,   scale = 1/sqrt(E)

Shapes (torch.nn.functional.scaled_dot_product_attention's contract):
    query (..., Hq, L, E)    key (..., Hkv, S, E)    value (..., Hkv, S, Ev)
    attn_mask broadcastable to (..., Hq, L, S): bool (True = may attend) or float (added)
    output (..., Hq, L, Ev), in the query's dtype

With ``enable_gqa`` query head h reads KV head h // (Hq // Hkv)
(K/V expanded with repeat_interleave). Rows with no visible key return zeros,
as torch's SDPA does on CPU.
"""
from __future__ import annotations

import math

import torch

from harness.reference.masks import causal_mask


def attention_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                   scale=None, enable_gqa=False, compute_dtype=torch.float64, scale_at="scores"):
    """The textbook math in ``compute_dtype``; returns a tensor of that dtype.

    Used twice by the tolerance policy: in float64 as the truth, and in the
    input dtype as the "naive same-precision" error yardstick. ``scale_at`` says where the
    1/sqrt(E) goes, which only changes the rounding: "scores" ((q k^T) * scale, the textbook),
    "query" ((q * scale) k^T, FlashAttention), "split" ((q sqrt(scale)) (k sqrt(scale))^T,
    torch's math backend).
    """
    q, k, v = (t.to(compute_dtype) for t in (query, key, value))
    E, L, S = q.shape[-1], q.shape[-2], k.shape[-2]
    hq, hkv = q.shape[-3], k.shape[-3]
    if hq != hkv:
        if not enable_gqa or hq % hkv:
            raise ValueError(f"query has {hq} heads and key {hkv}; needs enable_gqa and Hq % Hkv == 0")
        k = k.repeat_interleave(hq // hkv, dim=-3)  # (..., Hq, S, E)
        v = v.repeat_interleave(hq // hkv, dim=-3)  # (..., Hq, S, Ev)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if scale_at == "scores":
        scores = (q @ k.transpose(-2, -1)) * scale  # (..., Hq, L, S)
    elif scale_at == "query":
        scores = (q * scale) @ k.transpose(-2, -1)
    elif scale_at == "split":
        root = math.sqrt(scale)
        scores = (q * root) @ (k * root).transpose(-2, -1)
    else:
        raise ValueError(f"scale_at must be 'scores', 'query' or 'split', got {scale_at!r}")
    visible = torch.ones(L, S, dtype=torch.bool, device=q.device)
    if is_causal:
        visible = causal_mask(L, S, "top_left", device=q.device)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        visible = visible & attn_mask
    elif attn_mask is not None:
        scores = scores + attn_mask.to(compute_dtype)
    visible = visible.expand_as(scores)
    scores = scores.masked_fill(~visible, float("-inf"))
    # stable softmax: subtract the row max (rows with no visible key: max = -inf -> use 0)
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    weights = torch.exp(scores - row_max)
    denom = weights.sum(dim=-1, keepdim=True)
    weights = torch.where(denom > 0, weights / denom.clamp_min(torch.finfo(compute_dtype).tiny),
                          torch.zeros_like(weights))
    if dropout_p > 0.0:
        keep = torch.rand_like(weights) >= dropout_p
        weights = weights * keep / (1.0 - dropout_p)
    return weights @ v  # (..., Hq, L, Ev)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """The protocol function: float64 math, cast back to the query's dtype."""
    out = attention_math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return out.to(query.dtype)
