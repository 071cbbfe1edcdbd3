"""Planted bug: LongRoPE switches to its long factors at seq_len >= original length instead of
seq_len > original: a prompt of exactly the original length is rotated with the long factors.

Real pattern: ``if seq_len >= original_max_position_embeddings`` in a Phi-3 port.
Caught by: rope_scaling.longrope
Message: longrope
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def longrope_long(self, seq_len, orig):
        return bool(seq_len) and seq_len >= orig  # BUG: >= instead of >


rope_frequencies = Planted().rope_frequencies
