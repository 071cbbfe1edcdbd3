"""Planted bug: w_i = 10000^(-i/d) instead of 10000^(-2i/d).

Real pattern: ``torch.arange(d // 2) / d`` as the exponent (pair index over the full dim).
Caught by: sinusoidal.frequencies.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Sinusoidal  # noqa: E402


class Planted(Sinusoidal):
    def exponent(self, dim):
        j = torch.arange(dim, dtype=torch.float64)
        return torch.div(j, 2, rounding_mode="floor") / dim  # BUG: should be 2i / d


sinusoidal_position_embedding = Planted().sinusoidal_position_embedding
