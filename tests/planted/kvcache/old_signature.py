"""Not a bug: a kernel written against the protocol before block_table, softcap and sinks.

Its attention_with_kvcache takes none of the three parameters (and no **kwargs), so it does not
support them (its record's options, harness.spec.protocol): the paged, softcap and sinks properties are reported
unsupported, never failed, though it declares nothing.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


_base = KVCache()


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False):
    return _base.attention_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, window, causal, scale,
                                        rotary_cos, rotary_sin, rotary_interleaved)
