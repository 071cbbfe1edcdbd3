"""Planted bug: the table gradient overwrites repeated positions instead of summing them.

Real pattern: a custom embedding backward written with ``grad[positions] = g`` (index_put without
accumulate), so a position used n times gets one of its n upstream rows, not their sum.
Caught by: position_grad.embedding_sum
Message: must be the sum of the upstream rows
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LearnedPositionEmbedding as Base  # noqa: E402


class LearnedPositionEmbedding(Base):
    def accumulate(self, grad, positions, rows):
        grad[positions] = rows  # BUG: repeated positions overwrite, the last one wins
        return grad
