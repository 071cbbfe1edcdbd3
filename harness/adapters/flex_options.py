"""The two kernel options as FlexAttention takes them, shared by the flex-based adapters
(``torch_flex_attention`` for ``attention_varlen``, ``torch_kvcache`` for ``attention_with_kvcache``):

- softcap: a ``score_mod`` on the scaled scores (attention-gym's soft-capping example);
- sinks: flex_attention has no sink logit, but it returns each row's log-sum-exp ``lse`` of the
  scores, so the output is rescaled by Z / (Z + exp(sink)) = sigmoid(lse - sink) afterwards.
"""
from __future__ import annotations

import torch


def softcap_mod(softcap: float | None):
    """``score -> softcap * tanh(score / softcap)`` as a flex ``score_mod``; None when off."""
    if not softcap:
        return None

    def capped(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)
    return capped


def sink_weight(lse: torch.Tensor, sinks: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The factor each output row is scaled by with ``sinks (H,)``: lse (..., H, L) -> (..., H, L),
    in ``dtype`` promoted to at least float32 (the adapters' float64 inputs stay float64)."""
    dt = torch.promote_types(dtype, torch.float32)
    return torch.sigmoid(lse.to(dt) - sinks.to(lse.device, dt)[:, None])
