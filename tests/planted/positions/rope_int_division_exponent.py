"""Planted bug: the exponent arange(0, D, 2) // D is an integer division, so it is 0 for
every pair: theta_i = 1 for all i and every pair turns at the same speed.

Real pattern: integer ``//`` (or int tensors divided with ``torch.div(..., rounding_mode="floor")``)
in the frequency exponent; the scores then never decay with distance.
Caught by: rope.long_term_decay.
Message: does not decay
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def inv_freq(self, dim, base, dtype):
        return 1.0 / (base ** (torch.arange(0, dim, 2) // dim).to(dtype))  # BUG: integer division


apply_rotary_embedding = Planted().apply_rotary_embedding
