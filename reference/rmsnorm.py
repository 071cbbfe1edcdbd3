"""Readable RMS normalization, computed in float64 (Zhang & Sennrich 2019; the seeds' 2.3).

    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight

Shapes: x (*lead, *normalized_shape); the mean square is taken per token over
the trailing ``normalized_shape`` dims; weight (*normalized_shape); output like x.
No mean subtraction and no bias. ``eps=None`` means ``torch.finfo(opmath).eps``
as ``torch.nn.RMSNorm`` does since torch 2.6 (pytorch#142848): opmath is float32
for float16/bfloat16 inputs, the input dtype otherwise (older torch and its docs:
finfo of the input dtype; Llama and T5 use a fixed 1e-6; the named convention
``rmsnorm_eps``). The scale is ``weight`` itself (Gemma's
``1 + weight`` is the named convention ``rmsnorm_scale``).
"""
from __future__ import annotations

import torch
from torch import nn

from harness.reference.layernorm import trailing_dims


def default_eps(dtype: torch.dtype) -> float:
    """torch.nn.RMSNorm's eps=None: finfo of the opmath dtype (float32 for half inputs)."""
    return torch.finfo(torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype).eps


def rms_norm_math(x, normalized_shape, weight=None, eps=None, compute_dtype=torch.float64):
    """The math in ``compute_dtype``; ``weight`` is the effective scale (gamma).

    eps=None is resolved from the input dtype (``default_eps``), not the compute dtype.
    """
    eps = default_eps(x.dtype) if eps is None else eps
    dims = trailing_dims(normalized_shape)
    h = x.to(compute_dtype)
    y = h / torch.sqrt(h.pow(2).mean(dim=dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(compute_dtype)
    return y


class RMSNorm(nn.Module):
    """The protocol class: float64 math, cast back to the input's dtype (torchtune style)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(shape))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return rms_norm_math(x, self.normalized_shape, self.weight, self.eps).to(x.dtype)
