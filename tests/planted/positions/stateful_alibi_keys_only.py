"""Planted bug: the cached ALiBi module asks only whether its kept bias has enough KEYS, so a
call with more queries than the cache holds gets the cache's fewer rows.

Real pattern: x-transformers up to 1.16.x, ``if exists(self.bias) and self.bias.shape[-1] >= j``
(the query count was added to the test later).
Caught by: alibi_module.call_sequences (more queries over keys the cache already covers).
Message: returned shape
Message: the calls before it on the same instance
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedAlibi  # noqa: E402


class Planted(CachedAlibi):
    def covers(self, query_len, key_len):
        return self.bias is not None and self.bias.shape[-1] >= key_len  # BUG: the query count unchecked


AlibiPositionalBias = Planted
