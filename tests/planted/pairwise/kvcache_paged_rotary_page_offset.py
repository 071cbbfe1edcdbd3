"""Planted bug: on a paged cache, RoPE rotates the new tokens at their slot within the page
(position % block_size), not at their position in the sequence.

Real pattern: a paged kernel that reuses the in-page slot index it computed for the write as the
rotary position. A linear cache with RoPE tables is right (slot = position), a paged cache without
tables is right: only the two options together are wrong. Caught by: options_together.kvcache.
Message: pages of
Alone: test_kvcache.py -k test_rotary
Alone: test_paged_kvcache.py -k test_paged_agreement
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kvcache"))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    page = 0

    def attention_with_kvcache(self, q, k_cache, v_cache, *args, block_table=None, **kw):
        self.page = k_cache.shape[-2] if block_table is not None else 0
        return super().attention_with_kvcache(q, k_cache, v_cache, *args, block_table=block_table, **kw)

    def rotary_offset(self, c, start):
        return start % self.page if self.page else start  # BUG: the slot within the page


attention_with_kvcache = Planted().attention_with_kvcache
