"""Planted bug: the scaled frequencies come out in ascending order (slowest pair first).

Real pattern: building the wavelengths and inverting them without flipping back, or ``sort()``ing a
frequency table to bucket it.
Caught by: rope_scaling.ordered
Message: not decreasing
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def finish(self, inv, att):
        return inv.flip(0), att  # BUG: ascending


rope_frequencies = Planted().rope_frequencies
