"""Planted bug: without causal masking every one of the cache's Smax slots is read, not the first
cache_seqlens[b]: the slots past an item's length (a reused buffer's stale latents) join the softmax.

Real pattern: a split-KV kernel whose last split runs to the buffer's end instead of the item's length
when no causal mask would have cut it.
Caught by: mla.past_seqlen
Message: changed the output
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def length(self, cache_seqlens, b, Smax):
        return Smax if self._non_causal else int(cache_seqlens[b])  # BUG: the whole buffer

    def mla_decode(self, q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True):
        self._non_causal = not causal
        return super().mla_decode(q, kv_cache, cache_seqlens, head_dim_v, block_table, scale, causal)


mla_decode = Planted().mla_decode
