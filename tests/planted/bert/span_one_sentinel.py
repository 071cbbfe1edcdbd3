"""Planted bug: every span is replaced by the same sentinel.

Real pattern: ``<extra_id_0>`` used for every span (a single [MASK]-like id), so the decoder
cannot tell which span it is restoring. Caught by: span_corruption.sentinels.
Message: sentinels are
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def sentinel(self, i, sentinel_ids):
        return sentinel_ids[0]  # BUG


span_corruption = Planted().span_corruption
