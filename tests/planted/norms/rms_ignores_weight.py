"""Planted bug: RMSNorm never applies its weight.

Real pattern: ``F.rms_norm(x, shape, None, eps)`` or a fused kernel called without gamma, so the
checkpoint's norm weights are loaded and silently unused.
Caught by: rmsnorm.weight (the output matches neither x_hat * weight nor x_hat * (1 + weight)).
Message: rmsnorm_scale: the behaviour matches no known convention
Message: the weight is ignored
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def scale(self, y):
        return y  # BUG: * weight missing
