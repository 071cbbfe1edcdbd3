"""Planted bug: chunked attention over the cache is run as a sliding window of ``chunk`` keys.

Real pattern: a backend without chunked masks that maps Llama 4's ``attention_chunk_size`` onto
its sliding-window path (the two look alike: both keep at most ``chunk`` keys per query): a query
then sees the last keys of the previous chunk, which the model never did in training. Caught by:
kvcache_chunked.decode, kvcache_chunked.other_chunks.
Message: not chunked attention over the
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def chunk_visible(self, q_pos, key_pos, chunk):
        return key_pos[None, :] > q_pos[:, None] - chunk  # BUG: a window of chunk keys, not the query's chunk


attention_with_kvcache = Planted().attention_with_kvcache
