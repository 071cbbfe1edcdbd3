"""Planted sibling: ``attention_with_kvcache`` as ``reference`` on a linear cache, but a paged call
reads and writes every item through the first row of the block table.

Real pattern: a paged kernel that indexes the block table without the batch stride (a row pointer
never advanced), so every sequence uses sequence 0's pages; a batch of one, and every linear-cache
call, are right. Caught by: the consistency section's paged-against-linear differential check
(attention_with_kvcache), held to reference's linear call.
"""
from harness import reference


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None):
    if block_table is not None:
        block_table = block_table[:1].expand_as(block_table)  # BUG: row 0 for every item
    return reference.attention_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, window, causal, scale,
                                            rotary_cos, rotary_sin, rotary_interleaved, block_table, softcap, sinks)
