"""Planted bug: the new keys/values are written to their logical slot, not the physical one.

Real pattern: a cache-update kernel (vLLM's reshape_and_cache slot mapping) that computes the
slot as b * max_blocks * block_size + p, the place position p of item b would have if the pool
were laid out item after item, instead of block_table[b, p // block_size] * block_size +
p % block_size; it works as long as the allocator happens to hand out pages in order. Reads go
through the table. Caught by: kvcache.paged_writes.
Message: must land in their physical slot
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def physical(self, table, b, pos, block_size):
        logical = b * table.shape[-1] + pos // block_size  # BUG: the logical page, as if laid out in order
        return logical % self.num_blocks, pos % block_size

    def paged(self, qb, kb, vb, q_pos, pos, n, k_cache, v_cache, table, b, *rest):
        self.num_blocks = k_cache.shape[0]
        return super().paged(qb, kb, vb, q_pos, pos, n, k_cache, v_cache, table, b, *rest)


attention_with_kvcache = Planted().attention_with_kvcache
