"""Planted bug: theta_i = base^(-i/D) instead of base^(-2i/D): the frequencies only fall
to base^(-1/2) instead of ~base^(-1), so the slow pairs that carry long-range position are lost.

Real pattern: indexing the exponent with the pair index i but dividing as if it were the dim
index 2i (``base ** (torch.arange(D // 2) / D)``), a common from-scratch RoPE mistake.
Caught by: rope.frequencies.
Message: pair angles at position 1
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def inv_freq(self, dim, base, dtype):
        return 1.0 / (base ** (torch.arange(0, dim // 2).to(dtype) / dim))  # BUG: should be 2i / D


apply_rotary_embedding = Planted().apply_rotary_embedding
