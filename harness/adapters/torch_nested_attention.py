"""torch's nested jagged tensors with ``F.scaled_dot_product_attention`` as ``attention_varlen``.

An independent correct control for packed attention on a CPU: the packed q, k, v become nested
tensors (``torch.nested.nested_tensor_from_jagged``, ``cu_seqlens`` as the offsets, one ragged
dimension per side, so Lq != Lk per sequence) and torch's SDPA runs on them (its math backend on a
CPU; autograd through it). The adapter's own lines: K/V heads ``repeat_interleave``d for GQA
(nested SDPA does not broadcast heads), the output's values read back in the packed layout, and
sequences without keys left out (their rows are zeros, the protocol's answer): torch 2.13's nested
SDPA raises "setStorage: ... out of bounds" on a batch with an empty key sequence whenever no key
sequence is longer than the longest query one (q_lens (1, 1), k_lens (0, 1); found by
``varlen.zero_length``), a bug of torch's, not of the contract.

What torch 2.13's nested SDPA does not take is declared: ``is_causal`` ("Nested tensors for query /
key are not supported when is_causal=True"), a window, softcap and sinks (no such arguments).

Tried and not possible on a CPU (so no adapter): FlashAttention's ``flash_attn_varlen_func`` (CUDA
kernels only; no CPU build), Hugging Face's ``_flash_attention_forward`` packing path (transformers
5.24 imports ``flash_attn``, ``flash_attn_interface`` or a Hub kernel through the ``kernels`` package:
all CUDA, the last a download), and torch's own ``torch.nn.attention.varlen.varlen_attn``
(``aten::_flash_attention_forward`` has no CPU kernel).
"""
from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

#: torch logs why each fused kernel was passed over, at every call: the math backend is the one meant here
logging.getLogger("torch.nested._internal.sdpa").setLevel(logging.ERROR)

HARNESS_UNSUPPORTED = {"is_causal", "varlen_window", "softcap", "sinks"}


def _nested(x: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    """(total, H, D) packed rows -> a nested (B, H, j, D) tensor with one ragged dimension."""
    nt = torch.nested.nested_tensor_from_jagged(x, offsets=cu_seqlens.to(torch.int64))
    return nt.transpose(1, 2)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None):
    if causal or window is not None or softcap or sinks is not None:
        raise NotImplementedError("torch's nested SDPA takes no causal mask, window, softcap or sinks")
    len_q, len_k = (c[1:] - c[:-1] for c in (cu_seqlens_q.to(torch.int64), cu_seqlens_k.to(torch.int64)))
    if (len_k == 0).any():  # (torch's bug, module doc): only the sequences that have keys go to torch
        out = q.new_zeros(q.shape[0], q.shape[1], v.shape[-1])
        keep = len_k > 0
        if not keep.any():  # (no key at all: zeros, with the gradient of zeros)
            return out + 0 * q.sum()
        rows = torch.cat([torch.arange(int(s), int(e), device=q.device)
                          for s, e, kept in zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], keep) if kept])
        cu = [torch.cat([lens.new_zeros(1), lens[keep].cumsum(0)]) for lens in (len_q, len_k)]
        out[rows] = attention_varlen(q[rows], k, v, cu[0], cu[1], max_seqlen_q, max_seqlen_k, scale=scale)
        return out
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(_nested(q, cu_seqlens_q), _nested(k, cu_seqlens_k),
                                         _nested(v, cu_seqlens_k), scale=scale)
    return out.transpose(1, 2).values()
