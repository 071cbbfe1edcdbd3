"""Planted bug: the bucket function is called on query - key, so keys after the query land in
the past half (bidirectional) or the causal past collapses to bucket 0.

Real pattern: ``relative_position = context_position - memory_position`` in a port of Mesh TF's
``_relative_position_bucket`` (which takes key - query; the T5 seeds' "distance m - n" read as
the argument).
Caught by: t5_bias.relative_sign.
Message: buckets of query - key
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Bias  # noqa: E402


class Planted(T5Bias):
    def relative(self, q_pos, k_pos):
        return q_pos[:, None] - k_pos[None, :]  # BUG: query - key


t5_relative_position_bias = Planted().t5_relative_position_bias
