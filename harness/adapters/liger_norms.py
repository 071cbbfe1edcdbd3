"""liger-kernel's Triton LayerNorm and RMSNorm (``LigerLayerNormFunction``, ``LigerRMSNormFunction``,
forward and backward) as the protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.liger_norms     (pip install --no-deps liger-kernel==0.8.5 triton==3.9.0)

Called as liger's own modules call them (``liger_kernel/transformers/layer_norm.py`` and
``rms_norm.py``: ``LigerLayerNorm`` and ``LigerRMSNorm``, Llama casting mode, offset 0, ``in_place=True``),
from the ops modules directly: ``liger_kernel.transformers`` does not import with transformers 5.x
(``_CONFIG_FOR_DOC``). On a CPU the kernels run under Triton's interpreter. Before issue 42 they did
not run there ("'float' object has no attribute 'to'": a Python float eps, which
``harness.interpret.compiled_scalars`` now types as compiled code does; and libdevice ``rsqrt``, a
stub returning None under the interpreter, which ``harness.interpreter_fixes`` now computes): both
causes were on the CPU's side, not liger's.

The adapter's own lines: the protocol's constructors (``normalized_shape`` of several dims is
flattened into the last one around the call, as liger's modules normalize the last dim; no affine:
a frozen identity weight, zero bias; RMSNorm's ``eps=None`` is liger's default 1e-6, the
``rmsnorm_eps: fixed`` convention) and a fresh incoming gradient (``in_place=True`` writes dX into
dY, which the modules' callers never reuse).
"""
from __future__ import annotations

import math

import liger_kernel
import torch
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from torch import nn

__version__ = getattr(liger_kernel, "__version__", "0.8.5")
HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_UNSUPPORTED = {"float64", "autocast"}  # Triton kernels in the input dtype (float32 statistics)


class _Norm(nn.Module):
    def __init__(self, normalized_shape, eps, elementwise_affine: bool, bias: bool):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        n = math.prod(shape)
        self._w = nn.Parameter(torch.ones(n), requires_grad=elementwise_affine)
        self._b = nn.Parameter(torch.zeros(n), requires_grad=elementwise_affine) if bias else None

    @property
    def weight(self):
        return self._w.view(self.normalized_shape) if self.elementwise_affine else None

    @property
    def bias(self):
        return self._b.view(self.normalized_shape) if self.elementwise_affine and self._b is not None else None

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if tuple(x.shape[x.dim() - k:]) != self.normalized_shape:
            raise ValueError(f"input {tuple(x.shape)} does not end in normalized_shape {self.normalized_shape}")
        return x.reshape(*x.shape[:x.dim() - k], -1)


class LayerNorm(_Norm):
    """``LigerLayerNorm``: y = (x - mean) * rstd * weight + bias over the last dim."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias=True)

    def forward(self, x):
        w, b = self._w.to(x.dtype), self._b.to(x.dtype)
        return LigerLayerNormFunction.apply(self._rows(x), w, b, self.eps).reshape(x.shape) * 1.0


class RMSNorm(_Norm):
    """``LigerRMSNorm`` (Llama casting: statistics in float32, the weight applied in the input dtype)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__(normalized_shape, 1e-6 if eps is None else eps, elementwise_affine, bias=False)

    def forward(self, x):
        y = LigerRMSNormFunction.apply(self._rows(x), self._w.to(x.dtype), self.eps, 0.0, "llama", True)
        return y.reshape(x.shape) * 1.0
