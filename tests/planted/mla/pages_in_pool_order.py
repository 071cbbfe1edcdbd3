"""Planted bug: a paged cache read in pool order (item b's pages taken as blocks b * max_blocks ...),
the block table ignored: right only when pages were handed out in order.

Real pattern: a paged kernel tested only on a freshly allocated pool whose tables are contiguous.
Caught by: mla.paged
Message: a paged pool
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def positions(self, kv_cache, block_table, b, n):
        if block_table is None:
            return kv_cache[b, :n]
        block, pages = kv_cache.shape[1], block_table.shape[1]
        pos = torch.arange(n, device=kv_cache.device)
        return kv_cache[b * pages + pos // block, pos % block]  # BUG: no block_table lookup


mla_decode = Planted().mla_decode
