"""Planted bug: a call at offset o computes the rows for positions o .. o + L - 1 and stores
them as the table's rows 0 .. L - 1, so a later call that reads the table gets shifted positions.

Real pattern: rotary-embedding-torch 0.8.2, ``RotaryEmbedding.forward(t, seq_len, offset)``
wrote ``self.cached_freqs[:seq_len] = freqs`` for freqs computed at positions offset ..,
and served ``cached_freqs[offset:offset + seq_len]`` afterwards (0.8.3 caches only at offset 0).
Caught by: rope_module.call_sequences (a call from offset 0 after one at an offset).
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedRotary  # noqa: E402


class Planted(CachedRotary):
    def lookup(self, x, offset, L):
        key, needed = self.key(x), offset + L
        if self.cache is not None and self.cache[0] == key and self.covers(self.cache[1], needed):
            return self.cache[2][offset:needed], self.cache[3][offset:needed]
        cos, sin = self.rows(x, offset, L)
        self.cache = (key, L, cos, sin)  # BUG: rows for positions offset .. stored as rows 0 .. L - 1
        return cos, sin


RotaryEmbedding = Planted
