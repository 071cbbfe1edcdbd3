"""Attention over a KV cache (incremental decoding) in Triton, after ``flash_attn_with_kvcache``.

    q (B, Hq, Lq, E)        k_cache (B, Hkv, Smax, E)      v_cache (B, Hkv, Smax, Ev)
    k (B, Hkv, Lnew, E)     v (B, Hkv, Lnew, Ev)           (optional, given together)
    cache_seqlens (B,) ints or one int: c_b positions cached;  n_b = c_b + Lnew
    rotary_cos, rotary_sin (P, R/2), R <= E: RoPE on the first R dims of q and the new keys
    out (B, Hq, Lq, Ev) in q's dtype; the new (rotated) keys and values written into the caches

Position p lives in slot p mod Smax: a linear cache (n_b <= Smax), or with a window a rolling one
(Smax >= window). Query i of item b sits at position n_b - Lq + i (bottom-right); ``causal``: it
sees the keys p <= its position, ``window`` w: only p > position - w.

One program per (query block of BLOCK_M rows, batch x query head) runs the online softmax of
``flash_attention`` over the key positions it may see, BLOCK_N at a time (64, 32 or 16 rows and
the pipeline stages by the head dims and dtype: ``flash_attention.tiles``, its forward rule): a position
p < c_b is read from its cache slot, p >= c_b from the new keys (so a slot this call overwrites
still counts for its own queries), and nothing at or past n_b. The new keys and values are
written into the caches after the kernel (torch indexing); RoPE is ``reference.triton.rope``'s
kernel on the first R dims.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from harness.reference.triton.flash_attention import _dot, _pad, dot_dtype, launch, scalar
from harness.reference.triton.rope import rotate

#: the largest of the 16, 32, 64 rows ``tiles`` picks (why not all three: flash_attention's note)
HARNESS_TILES = (64,)


@triton.jit
def _decode(Q, KC, VC, KN, VN, SEQ, O, SCALE, Lq, Lnew, Smax, Hq, group, window,
            sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, snb, snh, snn, swb, swh, swn, sob, soh, som,
            E: tl.constexpr, EV: tl.constexpr, BE: tl.constexpr, BEV: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr,
            ACC: tl.constexpr, DOT: tl.constexpr):
    scale = tl.load(SCALE)  # float64 for float64 inputs (flash_attention.scalar)
    start_m = tl.program_id(0) * BLOCK_M
    b = tl.program_id(1) // Hq
    h = tl.program_id(1) % Hq
    hk = h // group
    c = tl.load(SEQ + b)  # positions already cached
    n = c + Lnew  # positions filled after this call
    offs_m = start_m + tl.arange(0, BLOCK_M)
    qpos = n - Lq + offs_m  # the queries' absolute positions
    offs_e = tl.arange(0, BE)
    offs_ev = tl.arange(0, BEV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :],
                mask=(offs_m[:, None] < Lq) & (offs_e[None, :] < E), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), ACC)
    l_i = tl.zeros([BLOCK_M], ACC)
    acc = tl.zeros([BLOCK_M, BEV], ACC)
    lo = tl.maximum(c - Smax, 0)  # the oldest position the cache still holds
    hi = n
    if CAUSAL:
        hi = tl.minimum(n, tl.maximum(n - Lq + start_m + BLOCK_M, 0))
    if WINDOWED:
        lo = tl.maximum(lo, n - Lq + start_m - window + 1)
    for start_n in range(lo, hi, BLOCK_N):
        p = start_n + tl.arange(0, BLOCK_N)
        cached = (p < c)[:, None]
        fresh = ((p >= c) & (p < n))[:, None]
        slot = p % Smax
        k = tl.load(KC + b * skb + hk * skh + slot[:, None] * skn + offs_e[None, :],
                    mask=cached & (offs_e[None, :] < E), other=0.0)
        k += tl.load(KN + b * snb + hk * snh + (p - c)[:, None] * snn + offs_e[None, :],
                     mask=fresh & (offs_e[None, :] < E), other=0.0)
        v = tl.load(VC + b * svb + hk * svh + slot[:, None] * svn + offs_ev[None, :],
                    mask=cached & (offs_ev[None, :] < EV), other=0.0)
        v += tl.load(VN + b * swb + hk * swh + (p - c)[:, None] * swn + offs_ev[None, :],
                     mask=fresh & (offs_ev[None, :] < EV), other=0.0)
        keep = (offs_m[:, None] < Lq) & (p[None, :] >= lo) & (p[None, :] < n)
        if CAUSAL:
            keep = keep & (p[None, :] <= qpos[:, None])
        if WINDOWED:
            keep = keep & (p[None, :] > qpos[:, None] - window)
        s = tl.where(keep, _dot(q, tl.trans(k), ACC, DOT) * scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        pr = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(pr, 1)
        acc = acc * alpha[:, None] + _dot(pr.to(v.dtype), v, ACC, DOT)
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(O + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :], out.to(O.dtype.element_ty),
             mask=(offs_m[:, None] < Lq) & (offs_ev[None, :] < EV))


def _rotary(x, positions, cos_table, sin_table, interleaved):
    """x (B, H, N, E) rotated over its first R dims at positions (B, N)."""
    R = 2 * cos_table.shape[-1]
    table = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos = cos_table[positions].to(table).contiguous()  # (B, N, R/2)
    sin = sin_table[positions].to(table).contiguous()
    return torch.cat([rotate(x[..., :R], cos, sin, interleaved), x[..., R:]], dim=-1)


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False):
    """The protocol function (see the module doc); writes k/v into the caches in place."""
    if (k is None) != (v is None):
        raise ValueError("k and v are given together")
    if rotary_cos is not None and k is None:
        raise ValueError("rotary tables need the new k and v")
    B, Hq, Lq, E = q.shape
    Hkv, Smax, Ev = k_cache.shape[1], k_cache.shape[2], v_cache.shape[-1]
    Lnew = 0 if k is None else k.shape[-2]
    if cache_seqlens is None:
        raise ValueError("cache_seqlens is required")
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((B,), cache_seqlens)
    seq = cache_seqlens.reshape(-1).to(torch.int32).to(q.device).contiguous()
    lens = [int(c) for c in seq.tolist()]
    for b, c in enumerate(lens):
        if c + Lnew > Smax and (window is None or Smax < window):
            raise ValueError(f"batch item {b}: {c + Lnew} positions do not fit {Smax} slots")
    if k is None:
        k, v = k_cache[:, :, :0], v_cache[:, :, :0]
    if rotary_cos is not None:
        new_pos = torch.stack([torch.arange(c, c + Lnew) for c in lens]).to(q.device)
        q_pos = torch.stack([torch.arange(c + Lnew - Lq, c + Lnew).clamp_min(0) for c in lens]).to(q.device)
        k = _rotary(k, new_pos, rotary_cos, rotary_sin, rotary_interleaved)
        q = _rotary(q, q_pos, rotary_cos, rotary_sin, rotary_interleaved)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty((B, Hq, Lq, Ev), dtype=q.dtype, device=q.device)
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    strides = [s for t in (q, k_cache, v_cache, k, v, out) for s in t.stride()[:3]]
    if out.numel():
        tile = launch(_pad(E), _pad(Ev), q.dtype)
        _decode[(triton.cdiv(Lq, tile["BLOCK_M"]), B * Hq)](
            q, k_cache, v_cache, k, v, seq, out, scalar(scale, q), Lq, Lnew, Smax, Hq, Hq // Hkv, window or 0, *strides,
            E=E, EV=Ev, BE=_pad(E), BEV=_pad(Ev), CAUSAL=bool(causal), WINDOWED=window is not None,
            ACC=tl.float64 if q.dtype == torch.float64 else tl.float32, DOT=dot_dtype(q.dtype), **tile)
    with torch.no_grad():  # the new keys and values, the last Smax of them, into their slots
        for b, c in enumerate(lens):
            kept = torch.arange(c, c + Lnew)[-Smax:] if Lnew else torch.arange(0)
            if len(kept):
                slots = (kept % Smax).to(k_cache.device)
                k_cache[b][:, slots] = k[b][:, Lnew - len(kept):].to(k_cache.dtype)
                v_cache[b][:, slots] = v[b][:, Lnew - len(kept):].to(v_cache.dtype)
    return out
