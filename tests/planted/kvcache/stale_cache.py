"""Planted bug: the new keys/values are never written into the cache; each call attends over
what the cache held (stale slots) instead of the tokens it was given.

Real pattern: a kernel that writes the update into a copy (``k_cache = k_cache.clone()``, or
``torch.cat`` into a new tensor and returns it) where the caller expects the preallocated
buffer to be written in place, as ``flash_attn_with_kvcache`` does: every later decode step then
reads stale memory. Caught by: kvcache.decode.
Message: must be written into the cache
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def write(self, cache, b, slots, new):
        cache = cache.clone()  # BUG: written into a copy, the caller's cache keeps its stale slots
        cache[b, :, slots] = new


attention_with_kvcache = Planted().attention_with_kvcache
