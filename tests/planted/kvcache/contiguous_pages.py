"""Planted bug: an item's pages are assumed to be contiguous in the pool: page j is read as
block block_table[b, 0] + j.

Real pattern: a kernel (or a "fast path") that reads only the first block-table entry and
strides through the pool from there, correct only while the allocator hands out consecutive
pages (a fresh pool, one sequence at a time); after frees and reuse the pages are scattered.
Writes go through the table. Caught by: kvcache.paged_layout_invisible.
Message: pages in order and permuted
Message: the outputs differ
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def pages(self, table, b, num_blocks):
        first = int(table[b, 0])  # BUG: the first page, then the pool's next ones
        return (first + torch.arange(table.shape[-1], device=table.device)) % num_blocks


attention_with_kvcache = Planted().attention_with_kvcache
