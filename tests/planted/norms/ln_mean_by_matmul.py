"""Planted bug: LayerNorm forms the per-token mean with a matmul against a 1/n column.

Real pattern: reductions written as GEMMs (x @ ones / n, F.linear with an averaging weight) to
reuse a fast matmul path. Right in float32, and right under ``model.half()`` (the statistics are
upcast first), but under ``torch.autocast`` the matmul runs in bfloat16/float16: the mean of
a token offset by 32 std is off by ~2^-9 of the offset, which the normalization magnifies.
Caught by: layernorm.autocast (float32 input and module inside torch.autocast).
Message: autocast keeps norms in float32
"""
import math
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def mean(self, h, dims):
        n = math.prod(h.shape[d] for d in dims)
        flat = h.flatten(start_dim=h.dim() - len(dims))
        column = torch.full((n, 1), 1.0 / n, dtype=h.dtype, device=h.device)
        lead = h.shape[:h.dim() - len(dims)]
        return (flat @ column).to(h.dtype).reshape(*lead, *([1] * len(dims)))  # BUG: autocast lowers it
