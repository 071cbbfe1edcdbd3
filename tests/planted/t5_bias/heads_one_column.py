"""Planted bug: every head reads head 0's column of the (num_buckets, H) table.

Real pattern: a port written and tested with one head, ``table[buckets, 0]`` (or
``bias[..., :1]``) broadcast to every head; single-head tests cannot see it.
Caught by: t5_bias.heads.
Message: each head must read its own column
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Bias  # noqa: E402


class Planted(T5Bias):
    def lookup(self, table, buckets):
        H = table.shape[1]
        return table[buckets][..., :1].permute(2, 0, 1).expand(H, *buckets.shape)  # BUG: column 0 for all


t5_relative_position_bias = Planted().t5_relative_position_bias
