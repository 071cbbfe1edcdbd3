"""Readable attention over packed variable-length sequences, computed in float64.

FlashAttention's ``flash_attn_varlen_func`` contract (the sequences packed along the first axis,
no padding):

    q (total_q, Hq, E)        k (total_k, Hkv, E)        v (total_k, Hkv, Ev)
    cu_seqlens_q, cu_seqlens_k (B + 1,) int32: sequence b's queries are rows
        cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of q, its keys rows cu_seqlens_k[b] .. of k/v
        (non-decreasing from 0; a zero-length sequence is two equal entries)
    max_seqlen_q, max_seqlen_k: ints, the longest query / key sequence (a kernel's grid size)
    sinks (Hq,) or None;  out (total_q, Hq, Ev), in q's dtype

Per sequence b, with Lq = its queries and Lk = its keys, every query attends ONLY to the keys
of its own sequence:

- query i sits at position i + Lk - Lq (bottom-right, as FlashAttention >= 2.1 and decoding);
  ``causal``: it sees the keys j <= its position; else all Lk keys;
- ``window`` w: only keys j > position - w (the protocol's ``w`` extent: w keys, as
  ``sliding_window_attention`` and ``attention_with_kvcache``); ``extent="w+1"`` is
  FlashAttention's ``window_size=(w, 0)``, the named convention ``window_extent``;
- ``chunk`` c (Llama 4's ``attention_chunk_size``): only keys j with j // c = position // c, the
  positions counted from the start of each sequence (a packed document's chunks restart with it);
- GQA: query head h reads KV head h // (Hq / Hkv);
- ``scale`` (default 1/sqrt(E)) multiplies q.k; ``softcap`` then caps the scaled scores and
  ``sinks`` enter the softmax's denominator (``reference.attention_options``);
- a row that sees no key (Lk = 0, or causal with Lq > Lk) is zeros. Rows of q past
  cu_seqlens_q[-1] belong to no sequence (the suites never pass any; here they are zeros).
"""
from __future__ import annotations

import math

import torch

from harness.reference.attention_options import apply_softcap, softmax_with_sinks


def bounds(cu_seqlens) -> list[tuple[int, int]]:
    """[(start, end)] of each sequence from cu_seqlens (B + 1,)."""
    cu = [int(c) for c in torch.as_tensor(cu_seqlens).reshape(-1).tolist()]
    if not cu or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must be non-decreasing from 0, got {cu}")
    return list(zip(cu[:-1], cu[1:]))


def visible_keys(Lq: int, Lk: int, causal: bool, window: int | None, extent: str = "w",
                 device=None, chunk: int | None = None) -> torch.Tensor:
    """(Lq, Lk) bool: which keys of its own sequence each query sees (bottom-right positions)."""
    pos = torch.arange(Lq, device=device)[:, None] + (Lk - Lq)
    j = torch.arange(Lk, device=device)[None, :]
    visible = torch.ones(Lq, Lk, dtype=torch.bool, device=device)
    if causal:
        visible &= j <= pos
    if window is not None:
        reach = window if extent == "w" else window + 1
        visible &= j > pos - reach
    if chunk is not None:
        visible &= j // chunk == pos // chunk
    return visible


def sequence_math(q, k, v, visible, scale=None, softcap=None, sinks=None, compute_dtype=torch.float64,
                  scale_at="scores"):
    """One sequence, head-first: q (Hq, Lq, E), k (Hkv, Lk, E), v (Hkv, Lk, Ev), visible (Lq, Lk)
    -> (Hq, Lq, Ev) in ``compute_dtype``. ``scale_at``: where the scale goes ("scores": (q k^T) s,
    "query": (q s) k^T), which only changes the rounding (the naive yardstick's candidates)."""
    q, k, v = (t.to(compute_dtype) for t in (q, k, v))
    hq, hkv = q.shape[0], k.shape[0]
    if hq % hkv:
        raise ValueError(f"{hq} query heads are not a multiple of {hkv} KV heads")
    k = k.repeat_interleave(hq // hkv, dim=0)  # (Hq, Lk, E)
    v = v.repeat_interleave(hq // hkv, dim=0)  # (Hq, Lk, Ev)
    if k.shape[-2] == 0:  # no key at all: every row sees nothing
        return torch.zeros(hq, q.shape[-2], v.shape[-1], dtype=compute_dtype, device=q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if scale_at == "query":
        scores = (q * scale) @ k.transpose(-2, -1)
    else:
        scores = (q @ k.transpose(-2, -1)) * scale  # (Hq, Lq, Lk)
    scores = apply_softcap(scores, softcap)      # before masking
    scores = scores.masked_fill(~visible, float("-inf"))
    weights = softmax_with_sinks(scores, None if sinks is None else sinks.to(compute_dtype))
    return weights @ v  # (Hq, Lq, Ev)


def varlen_math(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False, window=None, scale=None, softcap=None,
                sinks=None, extent="w", compute_dtype=torch.float64, scale_at="scores", chunk=None):
    """The math in ``compute_dtype``: out (total_q, Hq, Ev) of that dtype. In float64 the truth; in
    the input dtype the tolerance policy's naive yardstick."""
    q_bounds, k_bounds = bounds(cu_seqlens_q), bounds(cu_seqlens_k)
    if len(q_bounds) != len(k_bounds):
        raise ValueError(f"cu_seqlens_q has {len(q_bounds)} sequences, cu_seqlens_k {len(k_bounds)}")
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=compute_dtype, device=q.device)
    for (qs, qe), (ks, ke) in zip(q_bounds, k_bounds):
        if qe == qs:
            continue
        visible = visible_keys(qe - qs, ke - ks, causal, window, extent, device=q.device, chunk=chunk)
        seq = sequence_math(q[qs:qe].transpose(0, 1), k[ks:ke].transpose(0, 1), v[ks:ke].transpose(0, 1),
                            visible, scale, softcap, sinks, compute_dtype, scale_at)
        out[qs:qe] = seq.transpose(0, 1)  # (Lq, Hq, Ev)
    return out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None, chunk=None):
    """The protocol function: float64 math, cast back to q's dtype. ``max_seqlen_*`` are a kernel's
    launch sizes; the math reads the lengths from cu_seqlens (they must not exceed the maxima)."""
    longest_q = max((e - s for s, e in bounds(cu_seqlens_q)), default=0)
    longest_k = max((e - s for s, e in bounds(cu_seqlens_k)), default=0)
    if longest_q > max_seqlen_q or longest_k > max_seqlen_k:
        raise ValueError(f"a sequence is longer ({longest_q}, {longest_k}) than max_seqlen_q/k "
                         f"({max_seqlen_q}, {max_seqlen_k})")
    return varlen_math(q, k, v, cu_seqlens_q, cu_seqlens_k, causal, window, scale, softcap, sinks,
                       chunk=chunk).to(q.dtype)
