"""flash-linear-attention's softmax-attention Triton kernel, ``fla.ops.attn.parallel_attn`` (fla-core
0.6.0, forward and backward), as ``attention_varlen`` and ``sliding_window_attention``.

    --impl harness.adapters.fla_attention     (pip install --no-deps fla-core==0.6.0 einops==0.8.2 triton==3.9.0)

``parallel_attn(q, k, v, scale=, window_size=, cu_seqlens=, sink_bias=)`` is the attention of fla's
softmax-attention layers and hybrids: causal always, packed sequences through FlashAttention's
``cu_seqlens`` (one for queries and keys: each sequence attends to itself), a window of
``window_size`` keys (``[i - w + 1, i]``, the protocol's w), GQA, and gpt-oss sinks as
``sink_bias``. On a CPU its kernels run under Triton's interpreter (the harness's fixes in place).
What the adapter does: the protocol's packed (total, H, E) tensors as fla's batch of one (1, total,
H, E) and its int32 ``cu_seqlens`` as the LongTensor fla takes.

Declared: float64 and autocast (its kernels compute in float32 with half inputs and outputs in
the input's dtype), softcap (no such input). Raised as NotImplementedError (unsupported): non-causal
calls and different query and key lengths per sequence (one ``cu_seqlens``; for
``sliding_window_attention``, L != S).
"""
from __future__ import annotations

import torch
from fla.ops.attn import parallel_attn

try:
    from fla import __version__
except ImportError:  # pragma: no cover
    __version__ = "unknown"

HARNESS_DTYPES = ("float32", "float16", "bfloat16")
HARNESS_UNSUPPORTED = {"autocast", "softcap"}


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None):
    if not causal:
        raise NotImplementedError("fla's parallel_attn is causal only")
    if softcap:
        raise NotImplementedError("fla's parallel_attn has no softcap (declared)")
    if not torch.equal(cu_seqlens_q.cpu(), cu_seqlens_k.cpu()):
        raise NotImplementedError("fla's parallel_attn takes one cu_seqlens: equal query and key lengths")
    out = parallel_attn(q[None], k[None], v[None], scale=scale, window_size=None if window is None else int(window),
                        cu_seqlens=cu_seqlens_q.to(torch.long), sink_bias=sinks)
    return out[0]


def sliding_window_attention(query, key, value, window, scale=None):
    """(*batch, H, L, E) with L == S (fla's queries are its keys): (B, T, H, E) for fla."""
    batch, (hq, L, S) = query.shape[:-3], (query.shape[-3], query.shape[-2], key.shape[-2])
    if L != S:
        raise NotImplementedError("fla's parallel_attn takes as many queries as keys")
    flat = [t.reshape(-1, *t.shape[-3:]).transpose(1, 2) for t in (query, key, value)]
    out = parallel_attn(*flat, scale=scale, window_size=int(window))
    return out.transpose(1, 2).reshape(*batch, hq, L, value.shape[-1])
