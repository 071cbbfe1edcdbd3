"""Planted bug: the relative position is taken as query - key instead of key - query, so
past keys land in the future half and vice versa.

Real pattern: ``relative_position = context_position - memory_position`` (the Mesh TF code
negates it internally: ``n = -relative_position``; ports that drop one of the two signs).
Caught by: t5_bucket.bidirectional_halves.
Message: query - key
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def relative(self, relative_position):
        return -relative_position  # BUG: query - key


t5_relative_position_bucket = Planted().t5_relative_position_bucket
