"""Planted bug: the buckets come back as a float tensor, which cannot index the bias
embedding.

Real pattern: ``torch.where(is_small, relative_position.float(), val_if_large)`` or an ``.float()``
left from the log computation, then ``nn.Embedding`` fails with "Expected tensor for argument
#1 'indices' to have scalar type Long".
Caught by: t5_bucket.range.
Message: implementation error
Message: buckets are integers
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def finish(self, buckets):
        return buckets.float()  # BUG: buckets must be integers


t5_relative_position_bucket = Planted().t5_relative_position_bucket
