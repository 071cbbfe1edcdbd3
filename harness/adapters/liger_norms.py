"""liger-kernel's Triton LayerNorm and RMSNorm (``LigerLayerNormFunction``, ``LigerRMSNormFunction``,
forward and backward) as the protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.liger_norms     (pip install --no-deps liger-kernel==0.8.5 triton==3.9.0)

Called as liger's own modules call them (``liger_kernel/transformers/layer_norm.py`` and
``rms_norm.py``: ``LigerLayerNorm`` and ``LigerRMSNorm``, Llama casting mode, offset 0, ``in_place=True``),
from the ops modules directly: ``liger_kernel.transformers`` does not import with transformers 5.x
(``_CONFIG_FOR_DOC``). On a CPU the kernels run under Triton's interpreter. Before issue 42 they did
not run there ("'float' object has no attribute 'to'": a Python float eps, which
``harness.boundary.interpret.compiled_scalars`` now types as compiled code does; and libdevice ``rsqrt``, a
stub returning None under the interpreter, which ``harness.boundary.interpreter_fixes`` now computes): both
causes were on the CPU's side, not liger's.

The adapter's own lines: the protocol's constructors (``harness.adapters.last_dim_norm``; no affine:
a frozen identity weight, zero bias; RMSNorm's ``eps=None`` is liger's default 1e-6, the
``rmsnorm_eps: fixed`` convention) and a fresh incoming gradient: ``in_place=True`` writes dX into
dY, which every gradient property now fails ("the backward wrote into its incoming gradient"); in
Llama's decoder the norm's dY is a buffer autograd made for it alone, so the adapter gives it one, as
there. Where the same dY reaches another branch (Gemma 2/3's sandwich norms) liger itself passes
``in_place=False``.
"""
from __future__ import annotations

import liger_kernel
import torch
from liger_kernel.ops.layer_norm import LigerLayerNormFunction
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from torch import nn

from harness.adapters.last_dim_norm import layer_norm_class, rms_norm_class

__version__ = getattr(liger_kernel, "__version__", "0.8.5")
HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_UNSUPPORTED = {"float64", "autocast"}  # Triton kernels in the input dtype (float32 statistics)


class _LigerLayerNorm(nn.Module):
    """``LigerLayerNorm``'s forward over the last dim (x (N, n))."""

    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(n)), nn.Parameter(torch.zeros(n)), eps

    def forward(self, x):
        return LigerLayerNormFunction.apply(x, self.weight.to(x.dtype), self.bias.to(x.dtype), self.eps) * 1.0


class _LigerRMSNorm(nn.Module):
    """``LigerRMSNorm``'s forward over the last dim (x (N, n)), Llama casting (statistics in float32,
    the weight applied in the input dtype), offset 0, in place."""

    def __init__(self, n: int, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        return LigerRMSNormFunction.apply(x, self.weight.to(x.dtype), self.eps, 0.0, "llama", True) * 1.0


LayerNorm = layer_norm_class(_LigerLayerNorm, "``LigerLayerNorm``: y = (x - mean) * rstd * weight + bias over the last dim.")
RMSNorm = rms_norm_class(_LigerRMSNorm, 1e-6, "``LigerRMSNorm``; ``eps=None`` is liger's default 1e-6.")
