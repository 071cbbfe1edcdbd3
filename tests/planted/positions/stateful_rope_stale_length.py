"""Planted bug: the stateful rotary module's cos/sin table is built for the first call's length
and reused for every later call, however long: rows past the table are missing.

Real pattern: a cache filled once (``if self.cos_cached is None: ...``) with no
``seq_len > self.max_seq_len_cached`` rebuild; the slice ``cos[offset:offset + L]`` of a
one-row table broadcasts, so a prefill of one token makes every later position position 0.
Caught by: rope_module.call_sequences (a longer call after a short one).
Message: returned shape
Message: the calls before it on the same instance
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedRotary  # noqa: E402


class Planted(CachedRotary):
    def covers(self, rows, needed):
        return True  # BUG: a table built for the first length is kept for longer calls


RotaryEmbedding = Planted
