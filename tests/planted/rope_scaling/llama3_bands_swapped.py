"""Planted bug: Llama 3's rule divides the pairs whose wavelength is BELOW orig / low_freq_factor
(the comparison flipped), so the high-frequency band is scaled and the low one kept.

Real pattern: ``wavelen < low_freq_wavelen`` in a port of ``apply_scaling``.
Caught by: rope_scaling.llama3_bands
Message: llama3
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def llama3_divide(self, wavelen, low_wavelen):
        return wavelen < low_wavelen  # BUG: flipped


rope_frequencies = Planted().rope_frequencies
