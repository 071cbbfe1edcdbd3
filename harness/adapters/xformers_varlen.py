"""xformers' attention-bias classes for packed sequences (``xformers.ops.fmha.attn_bias``), materialized,
as ``attention_varlen``.

    --impl harness.adapters.xformers_varlen     (pip install --no-deps xformers==0.0.35)

xformers' fused kernels (``memory_efficient_attention``) are CUDA-only, but the bias classes its users
build for packed batches are the contract they are held to, and they run anywhere: what is xformers'
here is ``BlockDiagonalMask.from_seqlens(q_seqlen, kv_seqlen)`` (each query block sees its own key
block), ``make_causal_from_bottomright()`` (causal per sequence, queries at the end of their keys),
``make_local_attention_from_bottomright(window)`` (its sliding window) and ``materialize`` (the
additive (total_q, total_k) bias, as xformers' own tests compare its kernels against). What the
adapter does: the attention over that bias, ``F.scaled_dot_product_attention`` with ``enable_gqa``
and the scale (as xformers' reference in its tests computes it), and rows that see no key set to
zeros (the protocol's answer; a -inf row is NaN in SDPA).

Declared: softcap and sinks (no such bias or argument), autocast and backward (the adapter's own
math, not xformers'). Not taken (NotImplementedError: unsupported, not failed): a window without
causal (no such bias class), and causal with more queries than keys in a sequence (its bottom-right
classes raise "Expected num_keys >= num_queries", a limit of its contract that the harness named on
the adapter's first run). xformers 0.0.35 imports with
torch 2.13 (``--no-deps``: its requirement pulls a CUDA torch) and warns that its C++ extensions are
not built for this torch; the bias classes are pure Python.
"""
from __future__ import annotations

import logging
import warnings

import torch
import torch.nn.functional as F

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    logging.getLogger("xformers").setLevel(logging.ERROR)
    import xformers
    from xformers.ops.fmha.attn_bias import BlockDiagonalMask

__version__ = xformers.__version__
HARNESS_UNSUPPORTED = {"softcap", "sinks", "autocast", "backward"}


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None):
    if softcap or sinks is not None:
        raise NotImplementedError("xformers' attention biases have no softcap or sinks")
    q_lens = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).tolist()
    k_lens = (cu_seqlens_k[1:] - cu_seqlens_k[:-1]).tolist()
    if (causal or window is not None) and any(lq > lk for lq, lk in zip(q_lens, k_lens)):
        raise NotImplementedError("xformers' bottom-right causal biases need num_keys >= num_queries per "
                                  "sequence (its ValueError)")
    bias = BlockDiagonalMask.from_seqlens(q_lens, k_lens)
    if window is not None:
        if not causal:
            raise NotImplementedError("xformers has no non-causal local attention bias")
        bias = bias.make_local_attention_from_bottomright(int(window))
    elif causal:
        bias = bias.make_causal_from_bottomright()
    Tq, Tk = q.shape[0], k.shape[0]
    mask = bias.materialize((Tq, Tk), dtype=torch.float32, device=q.device)  # additive, -inf where not seen
    seen = torch.isfinite(mask).any(-1)  # (Tq,)
    qh, kh, vh = q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
    out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask.to(q.dtype), scale=scale,
                                         enable_gqa=q.shape[1] != k.shape[1])[0].transpose(0, 1)
    return torch.where(seen[:, None, None], out, torch.zeros((), dtype=out.dtype, device=out.device))
