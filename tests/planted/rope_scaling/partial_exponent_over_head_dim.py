"""Planted bug: with a partial rotary factor, the frequencies of the rotated dims are computed with the
exponent over the whole head dim (base^(-2i/head_dim)) instead of over the rotary dim.

Real pattern: ``inv_freq = 1 / base ** (arange(0, rotary_dim, 2) / head_dim)`` in ports of GPT-NeoX /
Phi rotary layers (the slice is right, the denominator is not).
Caught by: rope_scaling.partial
Message: partial_rotary_factor
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402
import torch  # noqa: E402


class Planted(Scaling):
    head_dim = None

    def rotary_dim(self, dim, scaling):
        self.head_dim = dim
        return super().rotary_dim(dim, scaling)

    def plain(self, dim, base):
        over = self.head_dim or dim  # BUG: the exponent's denominator is the head dim
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / over))


rope_frequencies = Planted().rope_frequencies
