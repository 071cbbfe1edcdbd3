"""Planted bug: even columns hold cos and odd columns sin: PE(0) = [1, 0, 1, 0, ...].

Real pattern: ``pe[:, 0::2] = torch.cos(...)`` / ``pe[:, 1::2] = torch.sin(...)`` (the inner
products are unchanged, so training works, but pretrained tables and the paper disagree).
Caught by: sinusoidal.origin.
Message: sinusoidal_layout: the behaviour matches no known convention
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Sinusoidal  # noqa: E402


class Planted(Sinusoidal):
    def table(self, num_positions, dim):
        ang = torch.arange(num_positions, dtype=torch.float64)[:, None] * self.omega(dim)[None]
        pe = torch.empty(num_positions, dim, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = ang[:, 0::2].cos(), ang[:, 1::2].sin()  # BUG: swapped
        return pe.float()


sinusoidal_position_embedding = Planted().sinusoidal_position_embedding
