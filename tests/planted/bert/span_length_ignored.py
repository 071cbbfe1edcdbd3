"""Planted bug: mean_span_length is ignored: every span has length 1.

Real pattern: BERT-style token masking with sentinels (one sentinel per corrupted token)
sold as span corruption; targets get twice as long. Caught by: span_corruption.span_length.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def counts(self, length, noise_density, mean_span_length):
        num_noise, _ = super().counts(length, noise_density, mean_span_length)
        return num_noise, max(1, min(num_noise, length - num_noise))  # BUG: spans of length 1


span_corruption = Planted().span_corruption
