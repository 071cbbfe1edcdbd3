"""Planted bug: cache_seqlens[0] is used for every batch item.

Real pattern: a kernel launched with one scalar ``seqlen_k`` for the whole batch (``int(cache_seqlens[0])``
or ``cache_seqlens.max()`` in the wrapper) - right while every sequence in a batch has the same
length, wrong once batched generation has sequences of different lengths. Caught by:
kvcache.ragged_lengths.
Message: batch item 1
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def lengths(self, cache_seqlens, batch):
        return [int(cache_seqlens[0])] * batch  # BUG: the first item's length for all


attention_with_kvcache = Planted().attention_with_kvcache
