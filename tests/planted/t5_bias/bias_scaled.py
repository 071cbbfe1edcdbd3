"""Planted bug: the bias is the table's entries times sqrt(head_dim) = 8.

Real pattern: x-transformers' ``RelativePositionBias`` returns ``qk_dots + bias * self.scale``
(its Attention builds it with ``scale = dim_head ** 0.5``, as its scores are already scaled);
a glue that keeps the factor returns a scaled table.
Caught by: t5_bias.lookup.
Message: the bias is the table's entry itself
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Bias  # noqa: E402


class Planted(T5Bias):
    def lookup(self, table, buckets):
        return super().lookup(table, buckets) * 64 ** 0.5  # BUG: x-transformers' scale kept


t5_relative_position_bias = Planted().t5_relative_position_bias
