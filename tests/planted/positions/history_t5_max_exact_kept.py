"""Planted bug: ``t5_relative_position_bucket`` derives max_exact (half of its half of the buckets)
at the first call and keeps it, so a later call with another ``num_buckets`` (or direction) puts the
exact/log boundary where the first call's bucket count had it. Each call alone is right.

Real pattern: a bucketing module that precomputes ``self.max_exact = num_buckets // 4`` in
``__init__`` from a default config, then is called with the per-layer ``num_buckets`` argument.
Caught by: history.t5_relative_position_bucket (another bucket count after the first call).
Message: Mesh TF formula
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    kept = None

    def max_exact(self, half, num_buckets):
        if self.kept is None:
            self.kept = half // 2
        return self.kept  # BUG: the first call's boundary


t5_relative_position_bucket = Planted().t5_relative_position_bucket
