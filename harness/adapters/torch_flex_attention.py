"""torch's FlexAttention with a document mask as ``attention_varlen``: packing as torchtune and
attention-gym do it.

The packed rows stay one sequence (q (1, Hq, total_q, E)); a ``mask_mod`` keeps each query to the
keys of its own document (the document of every row read from ``cu_seqlens``), at its
bottom-right position within it (causal), inside the window, inside its chunk (``chunk``: positions
within the document, so chunks restart with each document); ``softcap`` is a ``score_mod``
(softcap * tanh(score / softcap), as attention-gym's soft-capping example); GQA is FlexAttention's
``enable_gqa``. Sinks are the adapter's one line of math: FlexAttention returns each row's
log-sum-exp L of the (scaled, capped) scores, and a sink logit s in the denominator scales the row
by exp(L) / (exp(L) + exp(s)) = sigmoid(L - s).

On a CPU FlexAttention runs unfused (no ``torch.compile``: a compile per shape would cost seconds),
and it has no backward there ("FlexAttention does not support backward on CPU"): declared.
"""
from __future__ import annotations

import warnings

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from harness.adapters.flex_options import sink_weight, softcap_mod

HARNESS_UNSUPPORTED = {"backward"}


def _rows(cu: torch.Tensor, total: int):
    """(document, position within it, its length) of each of ``total`` packed rows."""
    cu = cu.to(torch.int64)
    rows = torch.arange(total, device=cu.device)
    doc = torch.searchsorted(cu[1:], rows, right=True)
    return doc, rows - cu[doc], (cu[1:] - cu[:-1])


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None, chunk=None):
    doc_q, pos_q, len_q = _rows(cu_seqlens_q, q.shape[0])
    doc_k, pos_k, len_k = _rows(cu_seqlens_k, k.shape[0])
    at = pos_q + (len_k - len_q)[doc_q]  # each query's bottom-right position in its document

    def mask_mod(b, h, qi, ki):
        keep = doc_q[qi] == doc_k[ki]
        if causal:
            keep = keep & (pos_k[ki] <= at[qi])
        if window is not None:
            keep = keep & (pos_k[ki] > at[qi] - window)
        if chunk is not None:  # (attention-gym's chunked mask, on positions within the document)
            keep = keep & (pos_k[ki] // chunk == at[qi] // chunk)
        return keep

    block_mask = create_block_mask(mask_mod, None, None, q.shape[0], k.shape[0], device=q.device)
    with warnings.catch_warnings():  # (the unfused path's advice to compile)
        warnings.simplefilter("ignore")
        out, lse = flex_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)), block_mask=block_mask,
                                  score_mod=softcap_mod(softcap), scale=scale,
                                  enable_gqa=q.shape[1] != k.shape[1], return_lse=True)
    out = out[0].transpose(0, 1)  # (total_q, Hq, Ev)
    if sinks is not None:
        weight = sink_weight(lse[0], sinks, q.dtype)  # (Hq, total_q)
        out = (out.to(weight.dtype) * weight.transpose(0, 1)[..., None]).to(q.dtype)
    return out.contiguous()
