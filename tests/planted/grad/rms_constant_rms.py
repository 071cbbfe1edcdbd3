"""Planted bug: the RMSNorm backward treats the rms as a constant: dx = gw * rstd.

Real pattern: a custom RMSNorm autograd.Function (or a detach() of the rms "for stability") that
drops the -x rstd^3 mean(gw x) term, the derivative of the rms itself.
Caught by: norm_grad.rmsnorm
Message: dx of RMSNorm
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def rms_dx(self, gw, h, rstd, dims):
        return gw * rstd  # BUG: the rms depends on x too
