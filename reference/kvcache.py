"""Readable attention over a KV cache (incremental decoding), computed in float64.

After FlashAttention's ``flash_attn_with_kvcache``, in the harness's head-first layout:

    q (B, Hq, Lq, E)           k_cache (B, Hkv, Smax, E)    v_cache (B, Hkv, Smax, Ev)
    k (B, Hkv, Lnew, E)        v (B, Hkv, Lnew, Ev)         (optional, given together)
    cache_seqlens (B,) ints, or one int: positions 0 .. c_b - 1 of item b are cached
    rotary_cos, rotary_sin (P, R/2): RoPE tables for positions 0 .. P - 1, R <= E even
    out (B, Hq, Lq, Ev), in q's dtype; k_cache / v_cache written in place

Per batch item b, with c = cache_seqlens[b] and n = c + Lnew:

- position p lives in slot p mod Smax. Without a window the cache must hold every position
  (n <= Smax: slot = position); with a window it may be a rolling cache of Smax >= window slots,
  which holds the last Smax positions. The keys the call attends to are the ones cached before
  its write (positions max(0, c - Smax) .. c - 1) and the new ones (c .. n - 1), so a slot this
  call overwrites still counts for its own queries;
- query i is at position n - Lq + i (bottom-right: the queries are the last Lq tokens);
  ``causal``: it sees the keys j <= its position; else every one of the n keys;
- ``window`` w: only keys j > position - w (the protocol's ``w`` extent: w keys, as
  ``sliding_window_attention``); ``extent="w+1"`` is FlashAttention's ``window_size=(w, 0)``,
  the named convention ``window_extent``;
- GQA: query head h reads KV head h // (Hq / Hkv);
- rotary tables: the new keys and the queries are rotated at their absolute positions over
  their first R dims (``rotary_interleaved``: pairs (2i, 2i+1), else rotate-half (i, i + R/2))
  before the keys are written; cached keys are stored rotated;
- the new keys/values (rotated) are written at slots (c .. n - 1) mod Smax; cache_seqlens is not
  advanced (the caller adds Lnew). Rows that see no key return zeros.
"""
from __future__ import annotations

import torch

from reference.attention import attention_math
from reference.rope import pair_indices


def rotate(x, positions, cos_table, sin_table, interleaved: bool, compute_dtype=torch.float64):
    """x (..., N, E) rotated at ``positions`` (N,) over its first R = 2 * cos_table.shape[-1] dims."""
    R = 2 * cos_table.shape[-1]
    cos = cos_table[positions].to(compute_dtype)  # (N, R/2)
    sin = sin_table[positions].to(compute_dtype)
    first, second = pair_indices(R, "interleaved" if interleaved else "rotate_half")
    out = x.to(compute_dtype).clone()
    a, b = out[..., first], out[..., second]
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def seqlens_list(cache_seqlens, batch: int) -> list[int]:
    if cache_seqlens is None:
        raise ValueError("cache_seqlens is required: the number of cached positions per batch item")
    if isinstance(cache_seqlens, int):
        return [cache_seqlens] * batch
    lens = [int(c) for c in cache_seqlens.reshape(-1).tolist()]
    if len(lens) != batch:
        raise ValueError(f"cache_seqlens has {len(lens)} entries for a batch of {batch}")
    return lens


def kvcache_math(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                 scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, extent="w",
                 compute_dtype=torch.float64):
    """The math in ``compute_dtype``: (out (B, Hq, Lq, Ev) in compute_dtype, new k_cache, new v_cache)
    (the caches as copies in their own dtype; the arguments are not touched). In float64 it is the
    truth; in the input dtype the tolerance policy's naive yardstick."""
    if (k is None) != (v is None):
        raise ValueError("k and v are given together")
    if rotary_cos is not None and k is None:
        raise ValueError("rotary tables need the new k and v")
    B, Smax = q.shape[0], k_cache.shape[-2]
    Lq, Lnew = q.shape[-2], 0 if k is None else k.shape[-2]
    reach = None if window is None else window if extent == "w" else window + 1
    k_after, v_after = k_cache.clone(), v_cache.clone()
    dev = q.device
    outs = []
    for b, c in enumerate(seqlens_list(cache_seqlens, B)):
        n = c + Lnew
        if n > Smax and (window is None or Smax < window):
            raise ValueError(f"batch item {b}: {n} positions do not fit {Smax} slots "
                             f"(a rolling cache needs a window <= Smax)")
        old = torch.arange(max(0, c - Smax), c, device=dev)
        new = torch.arange(c, n, device=dev)
        keys = k_cache[b][:, old % Smax].to(compute_dtype)  # (Hkv, cached, E)
        vals = v_cache[b][:, old % Smax].to(compute_dtype)
        qb = q[b].to(compute_dtype)
        q_pos = torch.arange(n - Lq, n, device=dev)
        if k is not None:
            kb = k[b].to(compute_dtype)
            if rotary_cos is not None:
                kb = rotate(kb, new, rotary_cos, rotary_sin, rotary_interleaved, compute_dtype)
                qb = rotate(qb, q_pos.clamp_min(0), rotary_cos, rotary_sin, rotary_interleaved, compute_dtype)
            keys = torch.cat([keys, kb], dim=-2)
            vals = torch.cat([vals, v[b].to(compute_dtype)], dim=-2)
            kept = new[-Smax:]  # a rolling cache keeps the last Smax of them
            k_after[b][:, kept % Smax] = kb[:, len(new) - len(kept):].to(k_cache.dtype)
            v_after[b][:, kept % Smax] = v[b][:, len(new) - len(kept):].to(v_cache.dtype)
        key_pos = torch.cat([old, new])  # (N,)
        visible = torch.ones(Lq, len(key_pos), dtype=torch.bool, device=dev)
        if causal:
            visible &= key_pos[None, :] <= q_pos[:, None]
        if reach is not None:
            visible &= key_pos[None, :] > q_pos[:, None] - reach
        outs.append(attention_math(qb, keys, vals, attn_mask=visible, scale=scale,
                                   enable_gqa=qb.shape[-3] != keys.shape[-3], compute_dtype=compute_dtype))
    return torch.stack(outs), k_after, v_after


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False):
    """The protocol function: float64 math; the caches written in place; out in q's dtype."""
    out, k_after, v_after = kvcache_math(q, k_cache, v_cache, k, v, cache_seqlens, window, causal, scale,
                                         rotary_cos, rotary_sin, rotary_interleaved)
    with torch.no_grad():
        k_cache.copy_(k_after)
        v_cache.copy_(v_after)
    return out.to(q.dtype)
