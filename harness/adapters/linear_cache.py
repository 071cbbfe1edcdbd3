"""The protocol's KV-cache arguments for the adapters of libraries that keep no cache of their own in
the protocol's form (shared by ``onnx_attention``, ``ort_attention``, ``hf_attention_kvcache``,
``xtransformers_attention`` and ``torchtune_kvcache``).

``attention_with_kvcache`` takes ``cache_seqlens`` as one int or a (B,) tensor and writes the new keys
and values into the caches at slots ``cache_seqlens[b]`` ..; a library whose cache concatenates (or
that reads an external cache) gets that write from the adapter, here.
"""
from __future__ import annotations

import torch


def cache_lengths(cache_seqlens, batch: int) -> list[int]:
    """``cache_seqlens`` (an int, or a (B,) tensor) as B Python ints."""
    if isinstance(cache_seqlens, int):
        return [int(cache_seqlens)] * batch
    return [int(c) for c in cache_seqlens.tolist()]


def append(k_cache: torch.Tensor, v_cache: torch.Tensor, k, v, cache_seqlens, rolling: str) -> tuple[list[int], int]:
    """Write the new keys and values of each item b at slots ``cache_seqlens[b]`` .. of a linear cache
    (B, H, Smax, D), in place; ``(lengths, new)``. A step past the cache's slots (the protocol's rolling
    window) raises NotImplementedError(``rolling``): such a library's cache holds every position."""
    lens, new = cache_lengths(cache_seqlens, k_cache.shape[0]), 0 if k is None else k.shape[-2]
    if max(lens) + new > k_cache.shape[-2]:
        raise NotImplementedError(rolling)
    if k is not None:
        with torch.no_grad():
            for b, c in enumerate(lens):
                k_cache[b, :, c:c + new], v_cache[b, :, c:c + new] = k[b], v[b]
    return lens, new
