"""Planted bug: the key length is taken from the pages in use, not from cache_seqlens + Lnew:
every slot of an item's last (partly filled) page is attended.

Real pattern: a paged kernel that loops over whole pages (ceil(n / block_size) of them) and masks
only with the causal relation: causal decoding hides the slots past n (they are after every
query), but a non-causal call (an encoder-decoder's cross attention over the cache, a
bidirectional prefix) sees the stale slots of the last page. Caught by: kvcache.paged_unfilled_slots.
Message: partly filled
Message: changed the output (causal=False)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def key_count(self, n, block_size):
        return -(-n // block_size) * block_size  # BUG: whole pages, the last one's unfilled slots included


attention_with_kvcache = Planted().attention_with_kvcache
