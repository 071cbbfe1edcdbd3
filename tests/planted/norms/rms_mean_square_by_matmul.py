"""Planted bug: RMSNorm forms the mean square as a row-wise dot product (a batched matmul).

Real pattern: ``torch.einsum("...i,...i->...", h, h) / n`` or ``(h.unsqueeze(-2) @ h.unsqueeze(-1))``
for the sum of squares. Right in float32 and under ``model.half()`` (the input is upcast first),
but ``torch.autocast`` runs the matmul in bfloat16/float16: the mean square is off by ~2^-9,
so a float32 output is ~100x off the float32 tolerance.
Caught by: rmsnorm.autocast (float32 input and module inside torch.autocast).
Message: autocast keeps norms in float32
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def mean_square(self, h, dims):
        n = math.prod(h.shape[d] for d in dims)
        flat = h.flatten(start_dim=h.dim() - len(dims))
        sumsq = (flat.unsqueeze(-2) @ flat.unsqueeze(-1)).squeeze(-1).to(h.dtype)  # BUG: autocast lowers it
        lead = h.shape[:h.dim() - len(dims)]
        return (sumsq / n).reshape(*lead, *([1] * len(dims)))
