"""Planted bug: RMSNorm scales by (1 + weight) without declaring it.

Real pattern: Gemma's ``x * (1 + weight)`` (weights stored as offsets from 1) mixed up with
Llama's ``x * weight``: loading one family's checkpoint into the other's norm.
Caught by: rmsnorm.weight (measured rmsnorm_scale: one_plus_weight; the protocol default is weight).
Message: convention mismatch
Message: rmsnorm_scale: the code follows one_plus_weight
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def scale(self, y):
        return y if self.weight is None else y * (1 + self.weight.to(y.dtype))  # BUG (undeclared)
