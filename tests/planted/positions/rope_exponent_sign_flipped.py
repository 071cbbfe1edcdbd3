"""Planted bug: theta_i = base^(+2i/D) instead of base^(-2i/D): the reciprocal is dropped, so the
frequencies grow from 1 to ~base instead of falling from 1 to ~1/base. The angles m * theta at
large positions are then enormous (6e4 * 1e4 rad), float32 rounds them by whole turns, and the
scores move when both positions shift: rope.relative fails too, and its message says that the same
configuration passes in float64 and that the angles at position 1 are not base^(-2i/D), naming
rope.frequencies as the property of the cause (tests/test_planted_positions.py).

Real pattern: ``inv_freq = base ** (torch.arange(0, dim, 2) / dim)`` -- the ``1.0 /`` of the usual
``1.0 / (base ** (torch.arange(0, dim, 2) / dim))`` forgotten (or a ``-`` lost from the exponent).
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
        return base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim)  # BUG: 1.0 / (...) dropped


apply_rotary_embedding = Planted().apply_rotary_embedding
