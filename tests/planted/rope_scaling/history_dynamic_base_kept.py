"""Planted bug: the dynamic rule keeps the base it grew for a long sequence: a shorter call after a
long one gets the grown base, not plain RoPE.

Real pattern: a rotary module whose dynamic update only grows its cache and never resets to the
original inv_freq when the sequence is short again (the bug Hugging Face's ``dynamic_rope_update``
fixes by resetting below the original length).
Caught by: history.rope_frequencies
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    grown = {}

    def dynamic_base(self, dim, base, s, seq_len):
        key = (dim, base, s["factor"], s["original_max_position_embeddings"])
        new = super().dynamic_base(dim, base, s, seq_len)
        self.grown[key] = max(self.grown.get(key, 0.0), new)  # BUG: never shrinks back
        return self.grown[key]


rope_frequencies = Planted().rope_frequencies
