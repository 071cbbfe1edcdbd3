"""Planted bug: the stateful rotary module caches each call's cos/sin rows under the call's
length only, so a later call of the same length at another offset gets the first call's positions.

Real pattern: rotary-embedding-torch 0.2.6, ``rotate_queries_or_keys(t, offset=...)`` cached
the frequencies under ``cache_key = f'freqs:{seq_len}'`` (0.2.7 added ``|offset:{offset}``).
Caught by: rope_module.call_sequences (the same length at another offset).
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedRotary  # noqa: E402


class Planted(CachedRotary):
    def lookup(self, x, offset, L):
        tables = self.__dict__.setdefault("tables", {})
        key = (*self.key(x), L)  # BUG: the offset is not part of the key
        if key not in tables:
            tables[key] = self.rows(x, offset, L)
        return tables[key]


RotaryEmbedding = Planted
