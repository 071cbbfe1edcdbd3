"""Planted bug: the RMSNorm backward computes dx in the storage of its incoming gradient dy.

Real pattern: liger-kernel's ``LigerRMSNorm(in_place=True)`` (its default) writes dX into dY's
buffer to save memory; every gradient it returns is right, but any other consumer of the same dY (a
residual branch that also reads the norm's output, a second loss, gradient checkpointing's replay)
then reads dX instead. The values of dx and dweight are exact, so only the check that the incoming
gradient comes back untouched sees it.
Caught by: norm_grad.rmsnorm
Message: wrote into its incoming gradient (grad_output)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base, _RMSNormFn, _f32  # noqa: E402
import torch  # noqa: E402


class _DxInDy(_RMSNormFn):
    @staticmethod
    def backward(ctx, dy):
        none, dx, dw, *rest = _RMSNormFn.backward(ctx, dy)
        dy.copy_(dx)  # BUG: dX written into dY's storage, returned as dX
        return none, dy, dw, *rest


class RMSNorm(Base):
    def forward(self, x):
        eps = torch.finfo(_f32(x).dtype).eps if self.eps is None else self.eps
        return _DxInDy.apply(self, x, self.weight, len(self.normalized_shape), eps)
