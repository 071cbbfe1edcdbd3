"""A library's norm over the last dim under the protocol's constructors (shared by the norm adapters:
``hf_norms``, ``fla_norms``, ``liger_norms``, ``torchtune_norms``).

The protocol builds ``LayerNorm(normalized_shape, eps, elementwise_affine)`` and
``RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`` as torch.nn does; library modules
take one ``hidden_size`` and normalize the last dim. ``LastDimNorm`` maps one onto the other and
changes nothing in the library's math:

- a multi-dim ``normalized_shape`` is flattened into the last dim around the call (the statistics
  over the flattened dims are the statistics over the trailing dims);
- ``.weight`` / ``.bias`` are (*normalized_shape) views of the library's parameters (whatever the
  library calls them: torchtune's RMSNorm has ``scale``), so writing them writes the library's;
- ``elementwise_affine=False``: a library that always has a weight keeps it at its identity init,
  frozen, and ``.weight`` / ``.bias`` are None.

Shapes: ``forward(x (*, *normalized_shape)) -> (*, *normalized_shape)``.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn


def shape_of(normalized_shape) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple (an int is one dim)."""
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def features(normalized_shape) -> int:
    """The library's ``hidden_size`` for ``normalized_shape``: the product of its dims."""
    return math.prod(shape_of(normalized_shape))


class LastDimNorm(nn.Module):
    """``inner`` (a library module normalizing the last of ``features(normalized_shape)`` dims) as a
    protocol norm. ``weight`` / ``bias``: the names of ``inner``'s parameters (None: it has none)."""

    def __init__(self, inner: nn.Module, normalized_shape, *, eps: float, elementwise_affine: bool,
                 weight: str | None = "weight", bias: str | None = "bias"):
        super().__init__()
        self.inner, self.normalized_shape = inner, shape_of(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self._names = (weight, bias)
        if not elementwise_affine:
            for p in inner.parameters():
                p.requires_grad_(False)

    def _param(self, which: int) -> torch.Tensor | None:
        name = self._names[which]
        p = getattr(self.inner, name, None) if name and self.elementwise_affine else None
        return None if p is None else p.view(self.normalized_shape)

    @property
    def weight(self) -> torch.Tensor | None:
        return self._param(0)

    @property
    def bias(self) -> torch.Tensor | None:
        return self._param(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise ValueError(f"input {tuple(x.shape)} does not end in normalized_shape {self.normalized_shape}")
        return self.inner(x.reshape(*x.shape[:x.dim() - k], -1)).reshape(x.shape)


def layer_norm_class(inner: Callable[[int, float], nn.Module], doc: str) -> type:
    """A protocol ``LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)`` around
    ``inner(features, eps)`` (a module with ``weight`` and ``bias``)."""

    class LayerNorm(LastDimNorm):
        def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
            super().__init__(inner(features(normalized_shape), eps), normalized_shape, eps=eps,
                             elementwise_affine=elementwise_affine)

    LayerNorm.__doc__ = doc
    return LayerNorm


def rms_norm_class(inner: Callable[[int, float], nn.Module], default_eps: float, doc: str,
                   weight: str = "weight") -> type:
    """A protocol ``RMSNorm(normalized_shape, eps=None, elementwise_affine=True)`` around
    ``inner(features, eps)``; ``eps=None`` is the library's ``default_eps`` (``rmsnorm_eps: fixed``)."""

    class RMSNorm(LastDimNorm):
        def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
            eps = default_eps if eps is None else eps
            super().__init__(inner(features(normalized_shape), eps), normalized_shape, eps=eps,
                             elementwise_affine=elementwise_affine, weight=weight, bias=None)

    RMSNorm.__doc__ = doc
    return RMSNorm


def op_norm_classes(run: Callable, layer_op: str, rms_op: str, rms_default_eps: float) -> tuple[type, type]:
    """The protocol's ``(LayerNorm, RMSNorm)`` over two ops of a graph runtime (ONNX's reference
    evaluator, onnxruntime): ``run(op, x, eps, *params)`` runs one node over the last axis, fed the
    module's weight (and bias) as its scale (and bias) inputs."""

    class _Layer(nn.Module):
        def __init__(self, n: int, eps: float):
            super().__init__()
            self.weight, self.bias, self.eps = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n)), eps

        def forward(self, x):
            return run(layer_op, x, self.eps, self.weight, self.bias)

    class _Rms(nn.Module):
        def __init__(self, n: int, eps: float):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

        def forward(self, x):
            return run(rms_op, x, self.eps, self.weight)

    return (layer_norm_class(_Layer, f"``{layer_op}(X, Scale, B, axis=-1, epsilon=eps)``."),
            rms_norm_class(_Rms, rms_default_eps, f"``{rms_op}(X, Scale, axis=-1, epsilon=eps)``; ``eps=None`` is "
                           f"{rms_default_eps:g}."))
