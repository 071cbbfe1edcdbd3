"""Planted bug: the RMSNorm backward accumulates dweight row by row in a random order (as atomic adds
land), while the target declares a deterministic backward.

Real pattern: fused norm kernels (Apex's, Triton tutorials') that reduce dweight across the rows
with atomic adds in the order the thread blocks finish: the last bits of dweight change from run to
run. Declared ``backward_determinism: deterministic``, every gradient property holds it to that.
Caught by: norm_grad.rmsnorm
Message: convention mismatch
Message: differ bitwise
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base, _RMSNormFn, _f32  # noqa: E402
import torch  # noqa: E402

HARNESS_CONVENTIONS = {"backward_determinism": "deterministic"}


class _AtomicDw(_RMSNormFn):
    @staticmethod
    def backward(ctx, dy):
        none, dx, dw, *rest = _RMSNormFn.backward(ctx, dy)
        if dw is None:
            return none, dx, dw, *rest
        h, rstd, _ = ctx.saved_tensors
        rows = (dy.to(h.dtype) * h * rstd).reshape(-1, *dw.shape)  # each row's share of dweight
        acc = torch.zeros_like(rows[0])
        for r in torch.randperm(rows.shape[0]).tolist():  # BUG: the order the atomic adds land in
            acc = acc + rows[r]
        return none, dx, acc.to(dw.dtype), *rest


class RMSNorm(Base):
    def forward(self, x):
        eps = torch.finfo(_f32(x).dtype).eps if self.eps is None else self.eps
        return _AtomicDw.apply(self, x, self.weight, len(self.normalized_shape), eps)
