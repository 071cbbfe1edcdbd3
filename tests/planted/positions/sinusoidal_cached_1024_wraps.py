"""Planted bug: the table is precomputed for 1024 positions and longer requests reuse it
modulo 1024, so position 1024 gets the embedding of position 0.

Real pattern: a ``register_buffer('pe', ...)`` of ``max_len`` rows (the PyTorch tutorial's
PositionalEncoding(max_len=5000)) indexed past its end with a modulo or a ring buffer.
Caught by: sinusoidal.extrapolation.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Sinusoidal  # noqa: E402


class Planted(Sinusoidal):
    def table(self, num_positions, dim):
        buffer = super().table(1024, dim)  # precomputed for max_len = 1024
        return buffer[torch.arange(num_positions) % 1024]  # BUG: wraps past 1024


sinusoidal_position_embedding = Planted().sinusoidal_position_embedding
