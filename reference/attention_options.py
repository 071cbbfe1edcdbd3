"""Two options of the attention kernels (issue 24), as every reference applies them, in float64.

softcap (Gemma 2; FlashAttention's ``softcap``), applied to the scaled scores BEFORE masking:

    scores <- softcap * tanh(scores / softcap)          (softcap = 0 or None: off)

sinks (gpt-oss; one learned logit per query head), in the softmax's denominator only:

    p_ij = exp(s_ij - m_i) / (exp(sink_h - m_i) + sum_j' exp(s_ij' - m_i)),   m_i = max(sink_h, max_j s_ij)
    out_i = sum_j p_ij v_j                                (the sink has no value: its weight is dropped)

A row with no visible key gives all its weight to the sink, so its output is 0 (as without sinks).

Shapes: scores (..., H, L, S) with -inf at masked keys; sinks (H,).
"""
from __future__ import annotations

import torch


def apply_softcap(scores: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """``softcap * tanh(scores / softcap)``; ``scores`` unchanged when ``softcap`` is 0 or None."""
    if not softcap:
        return scores
    return softcap * torch.tanh(scores / softcap)


def softmax_with_sinks(scores: torch.Tensor, sinks: torch.Tensor | None) -> torch.Tensor:
    """Row softmax of ``scores (..., H, L, S)`` (-inf = masked) with one extra logit per head
    (``sinks (H,)``) in the denominator; rows with no visible key (and no sink) are all zeros.
    Computed in ``scores.dtype``; returns the weights over the S keys only."""
    if sinks is None:
        row_max = scores.amax(dim=-1, keepdim=True)
    else:
        sink = sinks.to(scores.dtype).reshape(-1, 1, 1)          # (H, 1, 1)
        sink = sink.expand(*scores.shape[:-1], 1)                # (..., H, L, 1)
        row_max = torch.maximum(scores.amax(dim=-1, keepdim=True), sink)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    weights = torch.exp(scores - row_max)                        # (..., H, L, S)
    denom = weights.sum(dim=-1, keepdim=True)
    if sinks is not None:
        denom = denom + torch.exp(sink - row_max)
    tiny = torch.finfo(scores.dtype).tiny
    return torch.where(denom > 0, weights / denom.clamp_min(tiny), torch.zeros_like(weights))
