"""The ONNX standard's ``Attention`` operator (opset 25) as its reference evaluator computes it
(``onnx.reference.ReferenceEvaluator``, NumPy), as ``scaled_dot_product_attention``,
``sliding_window_attention`` and ``attention_with_kvcache``.

ONNX's reference evaluator is what the standard's conformance tests and its function-body
expansion are held to, and what converters (torch.onnx, onnxruntime's tests) compare against. It is
called here as its users call it: one ``Attention`` node in a model, run by ``ReferenceEvaluator``
on NumPy arrays. What is ONNX's: the scores, the scale (as sqrt(scale) on Q and on K, in the input
dtype), the boolean or float ``attn_mask``, ``is_causal`` (offset-aligned: j <= i + offset, where
offset is 0 without a cache and nonpad_kv_seqlen - Lq with an external cache), GQA/MQA from the
head counts, ``softcap``, the sliding window (``left_window_size`` keys before the query's own,
``right_window_size`` after), fully masked rows (zeros) and the external cache's padding
(``nonpad_kv_seqlen``). What the adapter does: the protocol's layouts to ONNX's 4-D ones (batch
dims flattened), the protocol's window of w keys as ``left_window_size = w - 1, right = 0``, an explicit scale in
float64 folded into the query (the ``scale`` attribute is a 32-bit float: 1.823 is 1e-9 off in
float64, which ``attention.scale`` saw), and
for ``attention_with_kvcache`` the cache write (the op reads an external cache, it does not write
one): the new keys and values are copied into the caches at cache_seqlens[b] .., then the op reads
the caches with ``nonpad_kv_seqlen = cache_seqlens + Lnew`` (queries bottom-right, as decoding does).

Declared: NumPy has no bfloat16 arithmetic of ONNX's here and no gradients or autocast
(``HARNESS_DTYPES``, ``backward``, ``autocast``, ``dropout``: the op has none); the KV cache's
paged pool, rotary tables and sinks (no such inputs) and a rolling window (positions past the
cache's slots: the external cache holds every position; such a call raises NotImplementedError).
"""
from __future__ import annotations

import functools

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from harness.adapters import linear_cache

__version__ = onnx.__version__
OPSET = 25
HARNESS_DTYPES = ("float32", "float16", "float64")
HARNESS_UNSUPPORTED = {"backward", "autocast", "dropout", "kvcache_paged", "kvcache_rotary", "sinks"}

_ELEM = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16, torch.float64: TensorProto.DOUBLE,
         torch.bool: TensorProto.BOOL}


@functools.lru_cache(maxsize=64)
def model(dtype: torch.dtype, mask: torch.dtype | None, nonpad: bool, attrs: tuple) -> onnx.ModelProto:
    """One ``Attention`` node over inputs Q, K, V (and attn_mask, nonpad_kv_seqlen when given); also
    run by onnxruntime's kernel (``harness.adapters.ort_attention``)."""
    names = ["Q", "K", "V", "attn_mask" if mask is not None else "", "", "", "nonpad_kv_seqlen" if nonpad else ""]
    while names and not names[-1]:
        names.pop()
    inputs = [helper.make_tensor_value_info(n, _ELEM[dtype], None) for n in ("Q", "K", "V")]
    if mask is not None:
        inputs.append(helper.make_tensor_value_info("attn_mask", _ELEM[mask], None))
    if nonpad:
        inputs.append(helper.make_tensor_value_info("nonpad_kv_seqlen", TensorProto.INT64, None))
    node = helper.make_node("Attention", names, ["Y"], **dict(attrs))
    graph = helper.make_graph([node], "attention", inputs, [helper.make_tensor_value_info("Y", _ELEM[dtype], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


@functools.lru_cache(maxsize=64)
def _evaluator(dtype: torch.dtype, mask: torch.dtype | None, nonpad: bool, attrs: tuple) -> ReferenceEvaluator:
    return ReferenceEvaluator(model(dtype, mask, nonpad, attrs))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _attention(q, k, v, *, mask=None, nonpad=None, runner=_evaluator, **attrs) -> torch.Tensor:
    """q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev) -> (B, Hq, L, Ev), in q's dtype and device.
    ``runner(dtype, mask dtype, nonpad, attrs)``: what runs the node (the reference evaluator)."""
    if q.dtype not in _ELEM or q.dtype == torch.bool:
        raise NotImplementedError(f"ONNX's reference evaluator is not called with {q.dtype} here (HARNESS_DTYPES)")
    if q.dtype == torch.float64 and attrs.get("scale") is not None:
        # ONNX attributes are 32-bit floats: a float64 model carries an explicit scale in its query
        # (times scale * sqrt(E), the op's default 1/sqrt(E) then exact), not in the attribute
        q = q * (attrs.pop("scale") * q.shape[-1] ** 0.5)
    attrs = tuple(sorted((key, val) for key, val in attrs.items() if val is not None))
    run = runner(q.dtype, None if mask is None else mask.dtype, nonpad is not None, attrs)
    feeds = {"Q": _np(q), "K": _np(k), "V": _np(v)}
    if mask is not None:
        feeds["attn_mask"] = _np(mask)
    if nonpad is not None:
        feeds["nonpad_kv_seqlen"] = np.asarray(nonpad, dtype=np.int64)
    (out,) = run.run(None, feeds)
    return torch.from_numpy(np.ascontiguousarray(out)).to(q.device)


def _flat(t: torch.Tensor) -> torch.Tensor:
    """(*batch, H, N, D) -> (prod(batch), H, N, D)."""
    return t.reshape(-1, *t.shape[-3:])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return sdpa_on(_evaluator, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def sdpa_on(runner, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """``scaled_dot_product_attention`` as one ``Attention`` node run by ``runner`` (see ``_attention``)."""
    if dropout_p:
        raise NotImplementedError("ONNX's Attention has no dropout")
    if query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError("query and key have different head counts: pass enable_gqa=True")
    batch, (hq, L, S) = query.shape[:-3], (query.shape[-3], query.shape[-2], key.shape[-2])
    mask = None
    if attn_mask is not None:  # broadcast to the op's (B, Hq, L, S) over the flattened batch dims
        mask = _flat(attn_mask.expand(*batch, hq, L, S)) if attn_mask.dim() > 2 else attn_mask
        mask = mask if mask.dtype == torch.bool else mask.to(query.dtype)
    out = _attention(_flat(query), _flat(key), _flat(value), mask=mask, runner=runner,
                     is_causal=int(bool(is_causal)),
                     scale=None if scale is None else float(scale))
    return out.reshape(*batch, hq, L, value.shape[-1])


def sliding_window_attention(query, key, value, window, scale=None):
    """Queries aligned to the end of the keys (nonpad_kv_seqlen = S: offset S - L), causal, the
    protocol's w keys as ONNX's ``left_window_size = w - 1``."""
    return sliding_on(_evaluator, query, key, value, window, scale)


def sliding_on(runner, query, key, value, window, scale):
    """``sliding_window_attention`` as one ``Attention`` node run by ``runner``."""
    batch, (hq, L, S) = query.shape[:-3], (query.shape[-3], query.shape[-2], key.shape[-2])
    q = _flat(query)
    out = _attention(q, _flat(key), _flat(value), nonpad=[S] * q.shape[0], runner=runner, is_causal=1,
                     left_window_size=int(window) - 1, right_window_size=0,
                     scale=None if scale is None else float(scale))
    return out.reshape(*batch, hq, L, value.shape[-1])


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None):
    if block_table is not None or rotary_cos is not None or sinks is not None:
        raise NotImplementedError("ONNX's Attention reads an external cache: no pages, rotary tables or sinks")
    lens, new = linear_cache.append(k_cache, v_cache, k, v, cache_seqlens,
                                    "a rolling cache: ONNX's external cache holds every position")
    return _attention(q, k_cache, v_cache, nonpad=[c + new for c in lens], is_causal=int(bool(causal)),
                      left_window_size=None if window is None else int(window) - 1,
                      right_window_size=None if window is None else 0,
                      softcap=None if not softcap else float(softcap), scale=None if scale is None else float(scale))
