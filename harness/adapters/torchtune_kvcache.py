"""torchtune's ``KVCache`` (``torchtune.modules.kv_cache``, torchtune 0.6.1) with the attention its
``MultiHeadAttention`` computes at generation, as ``attention_with_kvcache``.

    --impl harness.adapters.torchtune_kvcache     (pip install --no-deps torchtune==0.6.1)

What is torchtune's: the cache, ``KVCache.update`` (one ``cache_pos`` for the whole batch: the new
keys and values are written at the cache's current position, which advances by the step's
length) holding the protocol's ``k_cache`` / ``v_cache`` as its buffers, and the whole cache it
returns. What the adapter does, as ``MultiHeadAttention.forward`` and ``torchtune.generation`` do
(their modules import torchtune's package, which needs torchao, so they are not imported here):
the cache's position set to ``cache_seqlens`` (a model's cache after that many tokens), the key and
value heads expanded per query group (``k.unsqueeze(2).expand(...).flatten(1, 2)``: query head h
reads key/value head h // (Hq / Hkv)), the boolean mask over the whole cache that ``generate``
slices from its ``tril`` (query at position p sees slots j <= p; without ``causal`` the filled
slots), and torch's SDPA with that mask (``_sdpa_or_flex_attention``'s call without a BlockMask).

Declared: ragged lengths are outside torchtune's contract (one ``cache_pos`` per cache: a batch
shares its length; such calls raise NotImplementedError), as are a rolling window (``update``
asserts the cache is not full), paged pools, rotary tables (its layer rotates before caching),
softcap and sinks (its attention has neither).
"""
from __future__ import annotations

import torch

from harness.adapters.linear_cache import cache_lengths
from harness.adapters.torchtune_files import load

KVCache, _SOURCE = load("modules.kv_cache", "KVCache", "harness.adapters.torchtune_kvcache")
__version__ = "0.6.1"
HARNESS_UNSUPPORTED = {"kvcache_window", "kvcache_paged", "kvcache_rotary", "softcap", "sinks"}


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None):
    if window is not None or block_table is not None or rotary_cos is not None or softcap or sinks is not None:
        raise NotImplementedError("torchtune's KVCache and attention take no window, pages, rotary tables, "
                                  "softcap or sinks (declared)")
    B, Hq, Lq, _ = q.shape
    Hkv, Smax = k_cache.shape[1], k_cache.shape[2]
    lens = cache_lengths(cache_seqlens, B)
    if len(set(lens)) > 1:
        raise NotImplementedError("torchtune's KVCache keeps one position for the whole batch: ragged lengths")
    c, new = lens[0], 0 if k is None else k.shape[-2]
    if c + new > Smax:
        raise NotImplementedError("torchtune's KVCache.update asserts the cache has room (no rolling window)")
    cache = KVCache(B, Smax, Hkv, k_cache.shape[-1], k_cache.dtype).to(k_cache.device)
    cache.k_cache, cache.v_cache = k_cache, v_cache  # the protocol's caches, written in place by update
    cache.cache_pos.add_(c)
    if k is not None:
        with torch.no_grad():
            keys, values = cache.update(k, v)
    else:
        keys, values = cache.k_cache, cache.v_cache
    if Hq != Hkv:  # MultiHeadAttention.forward's expansion of the key/value heads
        keys = keys.unsqueeze(2).expand(B, Hkv, Hq // Hkv, Smax, keys.shape[-1]).flatten(1, 2)
        values = values.unsqueeze(2).expand(B, Hkv, Hq // Hkv, Smax, values.shape[-1]).flatten(1, 2)
    slots = torch.arange(Smax, device=q.device)
    if causal:  # generate's tril rows at the queries' positions
        pos = torch.arange(c + new - Lq, c + new, device=q.device)
        mask = slots[None, :] <= pos[:, None]
    else:
        mask = (slots < c + new)[None, :].expand(Lq, Smax)
    mask = mask[None].expand(B, Lq, Smax)[:, None]  # _attention_call's mask[:, None, :, :]
    return torch.nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale)
