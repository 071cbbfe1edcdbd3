"""Planted bug: RMSNorm divides by the mean square instead of its square root.

Real pattern: ``x / (x.pow(2).mean(-1, keepdim=True) + eps)``, a dropped ``rsqrt``/``sqrt``.
Caught by: rmsnorm.scale_invariance (RMSNorm(a x) = RMSNorm(x) / a instead of RMSNorm(x)).
Message: RMSNorm(
Message: vs RMSNorm(x)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def normalize(self, h, ms, eps):
        return h / (ms + eps)  # BUG: should be h / sqrt(ms + eps)
