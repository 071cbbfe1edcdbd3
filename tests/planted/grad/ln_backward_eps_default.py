"""Planted bug: the LayerNorm backward recomputes rstd with eps = 1e-6, not the module's eps.

Real pattern: a fused LayerNorm whose backward kernel recomputes 1/sqrt(var + eps) instead of
loading the forward's, and is launched with the library's default eps (1e-6) where the forward got
the module's (torch's default 1e-5): dx is off by a factor sqrt((var + 1e-5) / (var + 1e-6)), about
4.5e-6 / var relative, inside the float32 and half-precision tolerances; a float64 gradcheck
names the worst Jacobian element (norm_grad.layernorm sees it too where a large eps is drawn,
and in its float64 examples).
Caught by: norm_grad.gradcheck
Message: gradcheck of LayerNorm
Message: Jacobian mismatch
Message: worst: d output
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def ln_backward_rstd(self, h, rstd, dims):
        var = (h - h.mean(dims, keepdim=True)).pow(2).mean(dims, keepdim=True)
        return torch.rsqrt(var + 1e-6)  # BUG: the forward's eps is self.eps
