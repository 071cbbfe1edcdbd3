"""Planted bug: the logarithmic bucket is not capped at the last bucket of its half, so
distances past max_distance get buckets >= num_buckets (an IndexError in the bias embedding,
or silently the other half's buckets).

Real pattern: dropping the ``torch.min(..., num_buckets - 1)`` line when porting Mesh TF.
Caught by: t5_bucket.clamp.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def cap(self, large, half):
        return large  # BUG: no cap at half - 1


t5_relative_position_bucket = Planted().t5_relative_position_bucket
