"""Planted bug: queries aligned to the START of the keys when Lq != Lk (query i at position i),
so a KV-cache decoding step reads the first query's biases.

Real pattern: x-transformers 1.0.1's ``RelativePositionBias.forward``,
``q_pos = torch.arange(i)``; fixed in 1.0.2 (``torch.arange(j - i, j)``).
Caught by: t5_bias.end_alignment.
Message: aligned to the START of the keys
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Bias  # noqa: E402


class Planted(T5Bias):
    def query_positions(self, query_len, key_len):
        return torch.arange(query_len)  # BUG: the start of the keys


t5_relative_position_bias = Planted().t5_relative_position_bias
