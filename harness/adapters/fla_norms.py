"""flash-linear-attention's Triton LayerNorm and RMSNorm (``fla.modules.LayerNorm``, ``fla.modules.RMSNorm``,
forward and backward) as the protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.fla_norms     (pip install --no-deps fla-core==0.6.0 einops==0.8.2 triton==3.9.0)

Its modules as its models build them (``hidden_size``, ``elementwise_affine``, ``bias``, ``eps``), called
on x alone (no fused residual). On a CPU the kernels run under Triton's interpreter; they are
``@triton.autotune``d, which stopped them before their first run on a machine without a GPU driver
("0 active drivers": the autotuner times its configs on the device), a limit of the CPU's that the
harness's interpreter fixes lift (``harness.interpreter_fixes``: the first config is kept).

The adapter's own lines: the protocol's constructors (a multi-dim ``normalized_shape`` flattened into
the last dim around the call, ``.weight``/``.bias`` viewed back; LayerNorm built with ``bias=True``,
as the protocol's LayerNorm has one, fla's default being none; RMSNorm's ``eps=None`` is fla's
default 1e-5: the ``rmsnorm_eps: fixed`` convention).
"""
from __future__ import annotations

import math

import torch
from fla.modules import LayerNorm as _FlaLayerNorm
from fla.modules import RMSNorm as _FlaRMSNorm
from torch import nn

try:
    from fla import __version__
except ImportError:  # pragma: no cover
    __version__ = "unknown"

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_UNSUPPORTED = {"autocast", "float64"}  # its kernels compute in float32 (statistics and output)


class _Norm(nn.Module):
    def __init__(self, inner: nn.Module, normalized_shape):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.inner, self.eps, self.elementwise_affine = inner, inner.eps, inner.elementwise_affine

    @property
    def weight(self):
        w = self.inner.weight
        return None if w is None else w.view(self.normalized_shape)

    @property
    def bias(self):
        b = getattr(self.inner, "bias", None)
        return None if b is None else b.view(self.normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise ValueError(f"input {tuple(x.shape)} does not end in normalized_shape {self.normalized_shape}")
        return self.inner(x.reshape(*x.shape[:x.dim() - k], -1)).reshape(x.shape)


class LayerNorm(_Norm):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        n = math.prod((normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape)
        super().__init__(_FlaLayerNorm(n, elementwise_affine=elementwise_affine, bias=elementwise_affine, eps=eps),
                         normalized_shape)


class RMSNorm(_Norm):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        n = math.prod((normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape)
        super().__init__(_FlaRMSNorm(n, elementwise_affine=elementwise_affine, eps=1e-5 if eps is None else eps),
                         normalized_shape)
