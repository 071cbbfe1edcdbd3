"""Planted bug: for a head count that is not a power of two the slopes are the first H
of the next power of two's geometric sequence, instead of the closest lower power's slopes
followed by every other slope of the next power's.

Real pattern: simplified ``get_slopes`` ports (``get_slopes_power_of_2(next_pow2(n))[:n]``),
which give e.g. 12 heads slopes that no checkpoint was trained with.
Caught by: alibi.slopes.
Message: slopes for H=
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi, slopes_power_of_2  # noqa: E402


class Planted(Alibi):
    def get_slopes(self, n):
        return slopes_power_of_2(2 ** math.ceil(math.log2(n)))[:n]  # BUG: no interleave


alibi_slopes = Planted().alibi_slopes
alibi_bias = Planted().alibi_bias
