"""Planted bug: the plain frequencies are base^(-i/dim) over i < dim/2 instead of base^(-2i/dim).

Real pattern: ``torch.arange(dim // 2) / dim`` where ``torch.arange(0, dim, 2) / dim`` was meant.
Caught by: rope_scaling.plain
Message: plain frequencies
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402
import torch  # noqa: E402


class Planted(Scaling):
    def plain(self, dim, base):
        return 1.0 / (base ** (torch.arange(dim // 2, dtype=torch.int64).float() / dim))  # BUG: i/dim


rope_frequencies = Planted().rope_frequencies
