"""flash-linear-attention's Triton LayerNorm and RMSNorm (``fla.modules.LayerNorm``, ``fla.modules.RMSNorm``,
forward and backward) as the protocol's ``LayerNorm`` and ``RMSNorm``.

    --impl harness.adapters.fla_norms     (pip install --no-deps fla-core==0.6.0 einops==0.8.2 triton==3.9.0)

Its modules as its models build them (``hidden_size``, ``elementwise_affine``, ``bias``, ``eps``), called
on x alone (no fused residual). On a CPU the kernels run under Triton's interpreter; they are
``@triton.autotune``d, which stopped them before their first run on a machine without a GPU driver
("0 active drivers": the autotuner times its configs on the device), a limit of the CPU's that the
harness's interpreter fixes lift (``harness.boundary.interpreter_fixes``: the first config is kept).

The adapter's own lines: the protocol's constructors (``harness.adapters.last_dim_norm``; LayerNorm built with ``bias=True``,
as the protocol's LayerNorm has one, fla's default being none; RMSNorm's ``eps=None`` is fla's
default 1e-5: the ``rmsnorm_eps: fixed`` convention).
"""
from __future__ import annotations

from fla.modules import LayerNorm as _FlaLayerNorm
from fla.modules import RMSNorm as _FlaRMSNorm

from harness.adapters.last_dim_norm import LastDimNorm, features

try:
    from fla import __version__
except ImportError:  # pragma: no cover
    __version__ = "unknown"

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_UNSUPPORTED = {"autocast", "float64"}  # its kernels compute in float32 (statistics and output)


class LayerNorm(LastDimNorm):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        inner = _FlaLayerNorm(features(normalized_shape), elementwise_affine=elementwise_affine,
                              bias=elementwise_affine, eps=eps)
        super().__init__(inner, normalized_shape, eps=eps, elementwise_affine=elementwise_affine)


class RMSNorm(LastDimNorm):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        eps = 1e-5 if eps is None else eps
        inner = _FlaRMSNorm(features(normalized_shape), elementwise_affine=elementwise_affine, eps=eps)
        super().__init__(inner, normalized_shape, eps=eps, elementwise_affine=elementwise_affine)
