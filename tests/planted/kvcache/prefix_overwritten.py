"""Planted bug: the write's slot mapping counts from the chunk's first token (0 .. Lnew - 1)
instead of cache_seqlens[b] + i: the new keys overwrite the start of the sequence, the shared
prefix page another item reads.

Real pattern: with prefix caching the scheduler hands a sequence the pages of a cached common
prefix and feeds only the tokens after it; a slot mapping built from the positions within the
fed chunk (the prefix-cache hit not added) writes over the shared prefix page. Reads use the
right positions. Caught by: kvcache.paged_shared_prefix.
Message: the shared prefix's position
Message: was written
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def physical(self, table, b, pos, block_size):
        return super().physical(table, b, pos - pos[0], block_size)  # BUG: positions of the chunk, from 0


attention_with_kvcache = Planted().attention_with_kvcache
