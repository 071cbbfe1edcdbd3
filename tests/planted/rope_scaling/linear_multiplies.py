"""Planted bug: linear scaling multiplies the frequencies by the factor (positions x factor)
instead of dividing them.

Real pattern: position interpolation written as ``t = t * scale`` with ``scale = factor`` where
``t / factor`` was meant.
Caught by: rope_scaling.linear
Message: linear scaling by
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def linear(self, plain, s):
        return plain * s["factor"], 1.0  # BUG: times the factor


rope_frequencies = Planted().rope_frequencies
