"""Planted bug: noise_density used as the number of spans per token.

Real pattern: confusing the corrupted fraction with the rate of span starts
(num_spans = L * density, each of mean length mu): mu times too many tokens corrupted
(45 % for 15 % at mu = 3). Caught by: span_corruption.noise_density.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def counts(self, length, noise_density, mean_span_length):
        num_spans = max(round(length * noise_density), 1)  # BUG
        num_noise = min(max(round(num_spans * mean_span_length), num_spans), length - num_spans)
        return num_noise, max(1, min(num_spans, num_noise, length - num_noise))


span_corruption = Planted().span_corruption
