"""Planted bug: the last token of every span is missing from the targets.

Real pattern: an off-by-one slice ``tokens[start:end - 1]`` when copying the span (end taken
as inclusive): the text can no longer be rebuilt. Caught by: span_corruption.reconstruction.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def target_span(self, tokens, start, end):
        return tokens[start:end - 1]  # BUG


span_corruption = Planted().span_corruption
