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

Paged (``block_table`` (B, max_blocks) ints, as FlashAttention's ``block_table`` and vLLM's pages):

    k_cache (num_blocks, Hkv, block_size, E)    v_cache (num_blocks, Hkv, block_size, Ev)

position p of item b lives in physical block ``block_table[b, p // block_size]`` at slot
``p % block_size``: item b's logical cache is a linear one of max_blocks * block_size slots (no
rolling: n must fit), read and written through its table row. Only the table entries of the pages
holding positions 0 .. n - 1 are read; items may name the same blocks (a shared prefix), and the
call writes only positions c .. n - 1 of each item.

``softcap`` and ``sinks`` (``reference.attention_options``): the scaled scores are soft-capped
before masking, and the softmax's denominator holds one more logit per query head (sinks (Hq,)).

``chunk`` c (Llama 4's chunked local attention, ``reference.chunked_attention``): the query at position
p also needs j // c == p // c: its own chunk's keys only, chunks counted from position 0 of the
sequence (not from the call's first token). A rolling cache of Smax >= c slots holds them.
"""
from __future__ import annotations

import torch

from harness.reference.attention import attention_math
from harness.reference.attention_options import apply_softcap, softmax_with_sinks
from harness.reference.rope import pair_indices


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


def capacity(k_cache, block_table=None) -> int:
    """Slots per batch item: Smax of a linear cache, max_blocks * block_size of a paged one."""
    return k_cache.shape[-2] if block_table is None else block_table.shape[-1] * k_cache.shape[-2]


def locate(k_cache, b: int, positions, block_table=None):
    """Where item b's ``positions`` (N,) live: an index into the cache, ``cache[index]`` is
    (Hkv, N, D) for a linear cache and (N, Hkv, D) for a paged one (``gather``/``scatter``)."""
    if block_table is None:
        return b, slice(None), positions % k_cache.shape[-2]
    bs = k_cache.shape[-2]
    return block_table[b].long()[positions // bs], slice(None), positions % bs


def gather(cache, b: int, positions, block_table=None):
    """Item b's entries at ``positions`` (N,), as (Hkv, N, D)."""
    got = cache[locate(cache, b, positions, block_table)]
    return got if block_table is None else got.transpose(0, 1)


def scatter(cache, b: int, positions, values, block_table=None) -> None:
    """Write ``values`` (Hkv, N, D) at item b's ``positions`` (N,), in place."""
    cache[locate(cache, b, positions, block_table)] = values if block_table is None else values.transpose(0, 1)


def attend(q, keys, vals, visible, scale=None, softcap=None, sinks=None, compute_dtype=torch.float64):
    """q (Hq, Lq, E), keys (Hkv, N, E), vals (Hkv, N, Ev), visible (Lq, N) bool -> (Hq, Lq, Ev) in
    ``compute_dtype``: SDPA's math, with ``softcap`` before the mask and ``sinks`` (Hq,) in the
    denominator when given."""
    gqa = q.shape[-3] != keys.shape[-3]
    if not softcap and sinks is None:
        return attention_math(q, keys, vals, attn_mask=visible, scale=scale, enable_gqa=gqa,
                              compute_dtype=compute_dtype)
    q, k, v = (t.to(compute_dtype) for t in (q, keys, vals))
    if gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = apply_softcap((q @ k.transpose(-2, -1)) * scale, softcap)  # (Hq, Lq, N), capped before masking
    scores = scores.masked_fill(~visible, float("-inf"))
    sinks = None if sinks is None else sinks.to(compute_dtype).to(q.device)
    return softmax_with_sinks(scores, sinks) @ v


def kvcache_math(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                 scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, extent="w",
                 compute_dtype=torch.float64, block_table=None, softcap=None, sinks=None, chunk=None):
    """The math in ``compute_dtype``: (out (B, Hq, Lq, Ev) in compute_dtype, new k_cache, new v_cache)
    (the caches as copies in their own dtype; the arguments are not touched). In float64 it is the
    truth; in the input dtype the tolerance policy's naive yardstick."""
    if (k is None) != (v is None):
        raise ValueError("k and v are given together")
    if rotary_cos is not None and k is None:
        raise ValueError("rotary tables need the new k and v")
    B, Smax = q.shape[0], capacity(k_cache, block_table)
    Lq, Lnew = q.shape[-2], 0 if k is None else k.shape[-2]
    reach = None if window is None else window if extent == "w" else window + 1
    k_after, v_after = k_cache.clone(), v_cache.clone()
    dev = q.device
    outs = []
    for b, c in enumerate(seqlens_list(cache_seqlens, B)):
        n = c + Lnew
        local = min(x for x in (window, chunk, Smax + 1) if x)  # (a rolling cache must hold what a query sees)
        if n > Smax and (local > Smax or block_table is not None):
            raise ValueError(f"batch item {b}: {n} positions do not fit {Smax} slots "
                             f"(a rolling cache needs a window or chunk <= Smax, and a paged cache does not roll)")
        old = torch.arange(max(0, c - Smax), c, device=dev)
        new = torch.arange(c, n, device=dev)
        keys = gather(k_cache, b, old, block_table).to(compute_dtype)  # (Hkv, cached, E)
        vals = gather(v_cache, b, old, block_table).to(compute_dtype)
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
            drop = len(new) - len(kept)
            scatter(k_after, b, kept, kb[:, drop:].to(k_cache.dtype), block_table)
            scatter(v_after, b, kept, v[b][:, drop:].to(v_cache.dtype), block_table)
        key_pos = torch.cat([old, new])  # (N,)
        visible = torch.ones(Lq, len(key_pos), dtype=torch.bool, device=dev)
        if causal:
            visible &= key_pos[None, :] <= q_pos[:, None]
        if reach is not None:
            visible &= key_pos[None, :] > q_pos[:, None] - reach
        if chunk:
            visible &= (key_pos[None, :] // chunk) == (q_pos[:, None] // chunk)
        outs.append(attend(qb, keys, vals, visible, scale, softcap, sinks, compute_dtype))
    return torch.stack(outs), k_after, v_after


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False,
                           block_table=None, softcap=None, sinks=None, chunk=None):
    """The protocol function: float64 math; the caches written in place; out in q's dtype."""
    out, k_after, v_after = kvcache_math(q, k_cache, v_cache, k, v, cache_seqlens, window, causal, scale,
                                         rotary_cos, rotary_sin, rotary_interleaved,
                                         block_table=block_table, softcap=softcap, sinks=sinks, chunk=chunk)
    with torch.no_grad():
        k_cache.copy_(k_after)
        v_cache.copy_(v_after)
    return out.to(q.dtype)
