"""Planted bug: the logarithmic bucket is rounded to the nearest integer instead of
truncated, so distances in the upper half of a bucket move one bucket up.

Real pattern: ``torch.round`` (or ``.round().long()``) in place of ``.to(torch.long)``, which
changes which bias every long distance reads from a pretrained T5 checkpoint.
Caught by: t5_bucket.mesh_tf.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def truncate(self, x):
        return torch.round(x).to(torch.long)  # BUG: should truncate


t5_relative_position_bucket = Planted().t5_relative_position_bucket
