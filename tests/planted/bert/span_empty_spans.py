"""Planted bug: span boundaries drawn with replacement: empty and touching spans.

Real pattern: the random segmentation draws cut points with ``randint`` (duplicates allowed)
instead of distinct ones, producing zero-length segments: sentinels with nothing to predict
and noise spans with no kept token between them. Caught by: span_corruption.spans.
Message: empty
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def segment(self, items, segments, g):
        cuts = sorted(torch.randint(0, items + 1, (segments - 1,), generator=g).tolist())  # BUG: repeats, ends
        bounds = [0, *cuts, items]
        return [b - a for a, b in zip(bounds, bounds[1:])]


span_corruption = Planted().span_corruption
