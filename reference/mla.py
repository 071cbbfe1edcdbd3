"""Readable multi-head latent attention (DeepSeek-V2/V3's MLA) in its decode-kernel form, in float64.

The contract is FlashMLA's ``flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
..., softmax_scale=None, causal=False)`` (the output only; token-major layout), with the block table
optional (a linear cache) and its keyword order::

    q              (B, Lq, Hq, D)      D = Dc + Dr: the absorbed query, its latent part (Dc) then its
                                       RoPE part (Dr), already rotated
    kv_cache       (B, Smax, Hkv, D)   linear: the normalised latent c_kv (Dc) then the rotated k_pe (Dr)
                   (N, block, Hkv, D)  paged: a pool of N blocks of ``block`` positions (block_table)
    cache_seqlens  (B,) int            the filled positions of each item, the Lq new tokens included (the
                                       caller wrote them; the kernel writes nothing)
    head_dim_v     int Dv <= D         the values are kv_cache[..., :Dv] (DeepSeek: the latent, Dv = Dc)
    block_table    (B, max_blocks) int position p of item b lives in block block_table[b, p // block] at
                                       slot p % block
    scale          float               default D ** -0.5 (FlashMLA's; DeepSeek passes (d_nope + Dr) ** -0.5
                                       times its YaRN mscale squared)
    causal         bool                query i of item b sits at position cache_seqlens[b] - Lq + i and sees
                                       the keys up to it; without, every filled key
    output         (B, Lq, Hq, Dv)     in q's dtype

Hkv latent heads are shared by the Hq query heads as GQA (head h reads h // (Hq / Hkv)); DeepSeek and
FlashMLA have one. ``unabsorbed_math`` is what the decode form stands for: DeepSeek's attention with
its per-head up-projections W_UK (d_nope x Dc) and W_UV (dv x Dc) applied to the latent, keys
[W_UK c ; k_pe], values W_UV c; absorbing W_UK into the query (q_lat = W_UK^T q_nope) and W_UV into the
output gives the same numbers.
"""
from __future__ import annotations

import math

import torch

from harness.reference.attention import attention_math
from harness.reference.masks import causal_mask


def filled(kv_cache, cache_seqlens, block_table=None) -> list[torch.Tensor]:
    """Item b's filled cache, (cache_seqlens[b], Hkv, D), read from a linear cache or through the
    block table from a paged pool."""
    out = []
    for b, n in enumerate(int(s) for s in cache_seqlens):
        if block_table is None:
            out.append(kv_cache[b, :n])
            continue
        block = kv_cache.shape[1]
        pos = torch.arange(n, device=kv_cache.device)
        blocks = block_table[b].to(kv_cache.device).long()[pos // block]
        out.append(kv_cache[blocks, pos % block])
    return out


def mla_math(q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True,
             compute_dtype=torch.float64):
    """The decode form's math in ``compute_dtype``: (B, Lq, Hq, Dv) of that dtype."""
    B, Lq, Hq, D = q.shape
    scale = D ** -0.5 if scale is None else scale
    rows = []
    for b, cache in enumerate(filled(kv_cache, cache_seqlens, block_table)):
        n = cache.shape[0]
        keys = cache.transpose(0, 1)  # (Hkv, n, D)
        mask = causal_mask(Lq, n, "bottom_right", device=q.device) if causal else None
        out = attention_math(q[b].transpose(0, 1), keys, keys[..., :head_dim_v], attn_mask=mask, scale=scale,
                             enable_gqa=True, compute_dtype=compute_dtype)  # (Hq, Lq, Dv)
        rows.append(out.transpose(0, 1))
    return torch.stack(rows)


def mla_decode(q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True):
    """The protocol function: float64 math, cast back to q's dtype."""
    return mla_math(q, kv_cache, cache_seqlens, head_dim_v, block_table, scale, causal).to(q.dtype)


def absorb(q_nope, q_pe, w_uk):
    """The absorbed query (..., Hq, Dc + Dr) of DeepSeek's q_nope (..., Hq, d_nope) and q_pe (..., Hq, Dr):
    q_lat[h] = W_UK[h]^T q_nope[h] (w_uk (Hq, d_nope, Dc)), then the RoPE part."""
    return torch.cat([torch.einsum("...hn,hnc->...hc", q_nope, w_uk.to(q_nope.dtype)), q_pe], dim=-1)


def unabsorbed_math(q_nope, q_pe, c_kv, k_pe, w_uk, w_uv, cache_seqlens, scale, causal=True):
    """DeepSeek's attention before absorption, in float64: q_nope (B, Lq, Hq, d_nope), q_pe (B, Lq, Hq, Dr),
    c_kv (B, S, Dc), k_pe (B, S, Dr), w_uk (Hq, d_nope, Dc), w_uv (Hq, dv, Dc); keys [W_UK c ; k_pe],
    values W_UV c per head; output (B, Lq, Hq, dv)."""
    f = torch.float64
    k_nope = torch.einsum("bsc,hnc->bhsn", c_kv.to(f), w_uk.to(f))
    value = torch.einsum("bsc,hvc->bhsv", c_kv.to(f), w_uv.to(f))
    Hq = w_uk.shape[0]
    key = torch.cat([k_nope, k_pe.to(f)[:, None].expand(-1, Hq, -1, -1)], dim=-1)
    query = torch.cat([q_nope.to(f), q_pe.to(f)], dim=-1).transpose(1, 2)  # (B, Hq, Lq, d_nope + Dr)
    rows = []
    for b, n in enumerate(int(s) for s in cache_seqlens):
        Lq = query.shape[2]
        mask = causal_mask(Lq, n, "bottom_right", device=query.device) if causal else None
        rows.append(attention_math(query[b], key[b, :, :n], value[b, :, :n], attn_mask=mask, scale=scale))
    return torch.stack(rows).transpose(1, 2)


def default_scale(d_nope: int, d_rope: int) -> float:
    """DeepSeek's softmax scale without YaRN: 1/sqrt(d_nope + d_rope), the unabsorbed head dim's."""
    return 1.0 / math.sqrt(d_nope + d_rope)
