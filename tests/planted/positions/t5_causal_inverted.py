"""Planted bug: the ``bidirectional`` flag is read inverted: bidirectional=True gives the
causal buckets and bidirectional=False the two-halved ones.

Real pattern: libraries that name the flag ``causal`` (x-transformers, older lucidrains code)
wrapped as ``bidirectional=causal`` instead of ``bidirectional=not causal``.
Caught by: t5_bucket.causal_future.
Message: is the bidirectional flag inverted?
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def is_bidirectional(self, bidirectional):
        return not bidirectional  # BUG: inverted flag


t5_relative_position_bucket = Planted().t5_relative_position_bucket
