"""Planted bug: the LayerNorm backward drops the mean-of-gradient term:
dx = rstd * (gw - xhat * mean(gw * xhat)) instead of rstd * (gw - mean(gw) - xhat * mean(gw * xhat)).

Real pattern: a hand-derived LayerNorm backward that differentiates through the variance but
treats the mean as a constant (forgets that every x_j enters mean(x)).
Caught by: norm_grad.shift_invariance
Message: the backward lacks the mean-of-gradient term
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def ln_dx(self, gw, xhat, rstd, dims):
        return rstd * (gw - xhat * (gw * xhat).mean(dims, keepdim=True))  # BUG: - mean(gw) missing
