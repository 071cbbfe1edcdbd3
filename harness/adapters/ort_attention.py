"""onnxruntime's CPU attention kernels: its ``GroupQueryAttention`` contrib operator (``com.microsoft``;
onnxruntime 1.32) as ``attention_with_kvcache``, and its kernel of the ONNX standard's ``Attention``
operator (opset 25) as ``scaled_dot_product_attention`` and ``sliding_window_attention``.

    --impl harness.adapters.ort_attention     (pip install onnxruntime==1.32.0)

``GroupQueryAttention`` is the attention of the LLMs onnxruntime-genai exports (Llama, Mistral,
Phi, Gemma, gpt-oss): one node per layer over a KV cache in BNSH layout. It is called here as
those models call it, one node run by an ``InferenceSession`` (``harness.adapters.ort_graph``).
What is onnxruntime's: the scores and softmax, GQA from ``num_heads`` / ``kv_num_heads``, the
cache append (``present_key`` / ``present_value``), query positions from ``seqlens_k``
(``cache_seqlens + Lnew - 1``) and ``query_seqlens`` (``Lnew``: batched multi-token steps),
``causal``, ``local_window_size`` (w keys, the protocol's window), the windowed cache
(``sliding_window_cache``: its own eviction), ``softcap``, ``head_sink`` (gpt-oss sinks), the
rotary embedding (``do_rotary``, ``rotary_interleaved``, the protocol's tables as ``cos_cache`` /
``sin_cache``: queries and new keys rotated at their positions before caching).

What the adapter does: layouts (the protocol's (B, H, L, E) to the op's (B, L, H*E)), and the cache
in place. ORT returns the cache as ``present_*`` outputs (a model shares the buffers through IO
binding); the adapter copies the slots the step wrote back into the protocol's caches. A rolling
cache (positions past Smax, with a window): ORT keeps its windowed cache contiguous from row 0
(``L(T)`` most recent positions, its documented eviction rule), the protocol a ring (position p in
slot p mod Smax); the adapter lays the ring out as ORT's rows before the call and writes the new
positions back to their ring slots after it.

The standard ``Attention`` node is the one ``harness.adapters.onnx_attention`` builds and maps (its
docstring says how), run here by onnxruntime's kernel instead of the NumPy reference evaluator.

Declared: float64 and bfloat16 (no such CPU kernels; NumPy has no bfloat16), backward, autocast,
dropout (the standard op has none), head sizes that are multiples of 8 (``HARNESS_SIZES``), paged caches (``PagedAttention`` has no CPU kernel). Raised as NotImplementedError (unsupported,
never failed): Lq != Lnew (the op's queries are its new keys), a call without new keys, Ev != E,
``causal=False`` with a window (the op rejects it) and, with a rolling cache, rotary tables whose
rotated keys the op evicted within the step.
"""
from __future__ import annotations

import functools

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto

from harness.adapters import onnx_attention
from harness.adapters.linear_cache import cache_lengths
from harness.adapters.ort_graph import ELEM, load, np_of, session, to_torch

__version__ = ort.__version__
HARNESS_DTYPES = ("float32", "float16")
HARNESS_UNSUPPORTED = {"backward", "autocast", "dropout", "kvcache_paged"}
# GroupQueryAttention's head sizes: multiples of 8 ("head_size must be a multiple of 8"; it takes one size for
# keys and values: Ev != E raises NotImplementedError); the field names are shared with the SDPA configurations
HARNESS_SIZES = {"E": range(8, 257, 8), "Ev": range(8, 257, 8)}

_IN = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
       "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
       "k_norm_weight", "query_seqlens")
_INT = {"seqlens_k", "total_sequence_length", "query_seqlens"}


@functools.lru_cache(maxsize=64)
def _standard(dtype: torch.dtype, mask: torch.dtype | None, nonpad: bool, attrs: tuple) -> ort.InferenceSession:
    """onnxruntime's session of the standard ``Attention`` node ``onnx_attention`` builds."""
    if dtype not in (torch.float32, torch.float16):
        raise NotImplementedError(f"not run with {dtype} here (HARNESS_DTYPES)")
    return load(onnx_attention.model(dtype, mask, nonpad, attrs))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return onnx_attention.sdpa_on(_standard, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def sliding_window_attention(query, key, value, window, scale=None):
    return onnx_attention.sliding_on(_standard, query, key, value, window, scale)


def resident(total: int, capacity: int, window: int) -> int:
    """ORT's windowed cache: how many of ``total`` positions its rows [0, L) hold (its documented
    L(T): eviction reclaims G = C - W + 1 rows at once)."""
    if total <= capacity:
        return total
    g = capacity - window + 1
    return total - g * -(-(total - capacity) // g)


def _run(dtype: torch.dtype, feeds: dict[str, np.ndarray], **attrs) -> list[np.ndarray]:
    inputs = tuple((n, TensorProto.INT32 if n in _INT else ELEM[dtype]) if n in feeds else ("", 0) for n in _IN)
    outputs = tuple((n, ELEM[dtype]) for n in ("output", "present_key", "present_value"))
    attrs = tuple(sorted((k, v) for k, v in attrs.items() if v is not None))
    return session("GroupQueryAttention", "com.microsoft", inputs, outputs, attrs, 21).run(None, feeds)


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None):
    if block_table is not None:
        raise NotImplementedError("onnxruntime's PagedAttention has no CPU kernel")
    if q.dtype not in (torch.float32, torch.float16):
        raise NotImplementedError(f"GroupQueryAttention has no CPU kernel for {q.dtype} (HARNESS_DTYPES)")
    if k is None or k.shape[-2] != q.shape[-2]:
        raise NotImplementedError("GroupQueryAttention's queries are its new keys: Lq == Lnew > 0 only")
    if v_cache.shape[-1] != k_cache.shape[-1]:
        raise NotImplementedError("GroupQueryAttention takes one head size for keys and values")
    if rotary_cos is not None and (q.shape[-1] % 16 or rotary_cos.shape[-1] % 8):
        raise NotImplementedError("GroupQueryAttention's rotary embedding takes head sizes and rotary dims that are "
                                  "multiples of 16 (its documented limit)")
    if window is not None and not causal:
        raise NotImplementedError("GroupQueryAttention's local window is causal only")
    B, Hq, L, E = q.shape
    Hkv, Smax = k_cache.shape[1], k_cache.shape[2]
    lens = cache_lengths(cache_seqlens, B)
    totals = [c + L for c in lens]
    rolling = max(totals) > Smax
    if rolling and window is None:
        raise NotImplementedError("positions past the cache's slots without a window")
    rows = [_ring_rows(c, Smax, window) if rolling else list(range(c)) for c in lens]  # protocol slot of ORT row i
    past_k, past_v = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
    for b, r in enumerate(rows):
        past_k[b, :, :len(r)], past_v[b, :, :len(r)] = k_cache[b][:, r], v_cache[b][:, r]
    feeds = {"query": np_of(q.transpose(1, 2).reshape(B, L, Hq * E)),
             "key": np_of(k.transpose(1, 2).reshape(B, L, Hkv * E)),
             "value": np_of(v.transpose(1, 2).reshape(B, L, Hkv * E)),
             "past_key": np_of(past_k), "past_value": np_of(past_v),
             "seqlens_k": np.asarray([t - 1 for t in totals], np.int32),
             "total_sequence_length": np.asarray(max(totals), np.int32)}
    if causal:
        feeds["query_seqlens"] = np.asarray([L] * B, np.int32)
    elif L > 1 and max(lens) > 0 and B > 1:  # without query_seqlens, a multi-token step takes one item
        return torch.cat([attention_with_kvcache(q[b:b + 1], k_cache[b:b + 1], v_cache[b:b + 1], k[b:b + 1],
                                                 v[b:b + 1], lens[b], window, causal, scale, rotary_cos,
                                                 rotary_sin, rotary_interleaved, None, softcap, sinks)
                          for b in range(B)])
    if rotary_cos is not None:
        feeds["cos_cache"], feeds["sin_cache"] = np_of(rotary_cos.to(q.dtype)), np_of(rotary_sin.to(q.dtype))
    if sinks is not None:
        feeds["head_sink"] = np_of(sinks.to(q.dtype))
    out, pk, pv = _run(q.dtype, feeds, num_heads=Hq, kv_num_heads=Hkv, causal=int(bool(causal)),
                       scale=None if scale is None else float(scale), softcap=float(softcap) if softcap else None,
                       local_window_size=-1 if window is None else int(window),
                       sliding_window_cache=1 if rolling else None, do_rotary=1 if rotary_cos is not None else None,
                       rotary_interleaved=int(bool(rotary_interleaved)) if rotary_cos is not None else None)
    _write_back(k_cache, v_cache, to_torch(pk, q), to_torch(pv, q), lens, totals, Smax, window if rolling else None,
                k, v, rotary_cos is not None)
    return to_torch(out, q).reshape(B, L, Hq, E).transpose(1, 2)


def _ring_rows(cached: int, smax: int, window: int) -> list[int]:
    """The protocol's ring slots of the positions ORT's windowed cache holds at rows 0 .. after
    ``cached`` positions (oldest first)."""
    n = resident(cached, smax, window)
    return [p % smax for p in range(cached - n, cached)]


def _write_back(k_cache, v_cache, pk, pv, lens, totals, smax, window, k, v, rotated):
    """Copy the positions the step added from ORT's present caches into the protocol's caches."""
    with torch.no_grad():
        for b, (c, t) in enumerate(zip(lens, totals)):
            first = t - (resident(t, smax, window) if window is not None else t)  # the position of ORT's row 0
            for p in range(c, t):
                if p >= first:
                    k_cache[b, :, p % smax], v_cache[b, :, p % smax] = pk[b, :, p - first], pv[b, :, p - first]
                elif rotated:
                    raise NotImplementedError("a step longer than the windowed cache with rotary tables: the op "
                                              "evicted rotated keys that the ring keeps")
                else:  # evicted within the step: older than the window, kept by the ring as written
                    k_cache[b, :, p % smax], v_cache[b, :, p % smax] = k[b, :, p - c], v[b, :, p - c]
