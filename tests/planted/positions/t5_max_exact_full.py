"""Planted bug: max_exact is num_buckets // 2 even in bidirectional mode, where each half has
only num_buckets // 2 buckets and max_exact must be num_buckets // 4: the exact range is twice
as long and the logarithmic range squeezed.

Real pattern: computing ``max_exact`` before halving ``num_buckets`` for the bidirectional case.
Caught by: t5_bucket.exact_then_log.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def max_exact(self, half, num_buckets):
        return num_buckets // 2  # BUG: should be half // 2


t5_relative_position_bucket = Planted().t5_relative_position_bucket
