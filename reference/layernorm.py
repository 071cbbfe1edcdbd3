"""Readable layer normalization, computed in float64 (Ba et al. 2016; the seeds' 2.3).

    LayerNorm(x) = (x - mean) / sqrt(var + eps) * weight + bias

Shapes: x (*lead, *normalized_shape); the statistics are taken per token over
the trailing ``normalized_shape`` dims only (never across tokens or the batch,
unlike batch norm); weight, bias (*normalized_shape); output like x.
``var`` is the *biased* variance (divide by n, not n - 1); eps is inside the
square root. Constructed like ``torch.nn.LayerNorm``.
"""
from __future__ import annotations

import torch
from torch import nn


def trailing_dims(normalized_shape) -> tuple[int, ...]:
    n = 1 if isinstance(normalized_shape, int) else len(tuple(normalized_shape))
    return tuple(range(-n, 0))


def layer_norm_math(x, normalized_shape, weight=None, bias=None, eps=1e-5,
                    compute_dtype=torch.float64):
    """The textbook math in ``compute_dtype``; returns a tensor of that dtype.

    Used twice by the tolerance policy: in float64 as the truth, and in the
    input dtype as the "naive same-precision" error yardstick.
    """
    dims = trailing_dims(normalized_shape)
    h = x.to(compute_dtype)
    mean = h.mean(dim=dims, keepdim=True)  # (*lead, 1, ...)
    var = (h - mean).pow(2).mean(dim=dims, keepdim=True)  # biased
    y = (h - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight.to(compute_dtype)
    if bias is not None:
        y = y + bias.to(compute_dtype)
    return y


class LayerNorm(nn.Module):
    """The protocol class: float64 math, cast back to the input's dtype (torchtune style)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(shape))
            self.bias = nn.Parameter(torch.zeros(shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return layer_norm_math(x, self.normalized_shape, self.weight, self.bias, self.eps).to(x.dtype)
