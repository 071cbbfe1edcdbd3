"""Planted bug: cache_seqlens off by one: the new tokens are placed at cache_seqlens + 1, so one
slot past the filled part (never written) is attended to.

Real pattern: mixing up "number of cached tokens" with "index of the last cached token"
(``cache_position`` vs ``seqlens`` in ports between Hugging Face and FlashAttention conventions),
which leaves a hole of one uninitialized slot in the cache. Caught by: kvcache.unfilled_slots.
Message: slots past cache_seqlens
Message: changed the output
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def start(self, c):
        return c + 1  # BUG: one past the filled part


attention_with_kvcache = Planted().attention_with_kvcache
