"""Planted bug: the chunks are counted from the call's first query, not from position 0.

Real pattern: the chunked mask built from the call's query indices (``arange(q_len)``) and the
keys' offsets from the first query, as for a prompt, and reused at decode time: a decode step at
position p then starts a chunk of its own and sees only itself. The prompt (one call from
position 0) is right. Caught by: kvcache_chunked.decode, kvcache_chunked.other_chunks.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def chunk_visible(self, q_pos, key_pos, chunk):
        first = q_pos[0]  # BUG: positions relative to the call's first query
        return ((key_pos[None, :] - first) // chunk) == ((q_pos[:, None] - first) // chunk)


attention_with_kvcache = Planted().attention_with_kvcache
