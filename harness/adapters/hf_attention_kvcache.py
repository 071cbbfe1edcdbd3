"""transformers' attention as its decoder models call it at generation, as ``attention_with_kvcache``.

What is transformers' (5.x): the masks, built by ``masking_utils`` as ``create_causal_mask`` /
``create_sliding_window_causal_mask`` build them for a cache (``sdpa_mask`` for the SDPA path,
with its own decision to skip the mask and let SDPA's ``is_causal`` do it; ``eager_mask`` for the
eager paths; ``causal_mask_function`` and ``sliding_window_overlay``, or
``bidirectional_mask_function``, with the queries at offset ``cache_seqlens + Lnew - Lq``; with
``chunk``, Llama 4's ``create_chunked_causal_mask``'s ``chunked_causal_mask_function`` with no left
padding and ``local_size=chunk``), and the
attention functions the model families register: ``sdpa_attention_forward`` (Llama and most models:
GQA by ``enable_gqa``, by ``pack_gqa`` on a decode step, or by ``repeat_kv``), Gemma 2's
``eager_attention_forward`` (``softcap``: the logits soft-capped before the mask) and gpt-oss's
(``sinks``: the module's sink logits concatenated to the scores, dropped after the softmax).

What the adapter does: the cache. transformers' ``DynamicCache`` concatenates; the protocol writes
into fixed caches, so the new keys and values are copied into ``k_cache``/``v_cache`` at
cache_seqlens[b] .., then item b's first cache_seqlens[b] + Lnew slots are handed to the attention
function with the mask (one call per batch item: ragged lengths, as transformers' own padding-free
decoding does). The module the functions read is a stand-in with ``num_key_value_groups``,
``head_dim``, ``training=False``, ``is_causal`` and (gpt-oss) ``sinks`` in the query's dtype, as a
model holds its parameters.

Declared: paged pools and rotary tables (transformers' caches are linear; its models rotate before
caching: ``hf_positions`` holds its RoPE), float64 (the eager paths' softmax runs in float32 or the
input dtype), autocast and backward (not this adapter's subject). A rolling cache (positions past
the slots) and softcap with sinks together (no transformers model has both) raise
NotImplementedError: unsupported, never failed.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
import transformers
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import (and_masks, bidirectional_mask_function, causal_mask_function,
                                        chunked_causal_mask_function, eager_mask, sdpa_mask, sliding_window_overlay)
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward as gemma2_eager
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward as gpt_oss_eager

from harness.adapters import linear_cache

__version__ = transformers.__version__
HARNESS_DTYPES = ("float32", "float16", "bfloat16")
HARNESS_UNSUPPORTED = {"kvcache_paged", "kvcache_rotary", "autocast", "backward"}


def _mask_function(causal: bool, window, chunk):
    if chunk:
        if not causal:
            raise NotImplementedError("transformers' chunked attention (Llama 4) is causal only")
        base = chunked_causal_mask_function(int(chunk), torch.zeros(1, dtype=torch.long))  # (no left padding)
    else:
        base = causal_mask_function if causal else bidirectional_mask_function
    return base if window is None else and_masks(base, sliding_window_overlay(int(window)))


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None, chunk=None):
    if block_table is not None or rotary_cos is not None:
        raise NotImplementedError("transformers' caches are linear and its models rotate before caching")
    if softcap and sinks is not None:
        raise NotImplementedError("no transformers attention function takes softcap and sinks together")
    B, hq, Lq, E = q.shape
    hkv = k_cache.shape[1]
    lens, new = linear_cache.append(k_cache, v_cache, k, v, cache_seqlens,
                                    "a rolling cache: transformers' linear cache holds every position")
    module = SimpleNamespace(num_key_value_groups=hq // hkv, head_dim=E, training=False, is_causal=bool(causal),
                             sinks=None if sinks is None else sinks.to(q.dtype))
    scaling = E ** -0.5 if scale is None else float(scale)
    mask_fn = _mask_function(bool(causal), window, chunk)
    local = min((int(x) for x in (window, chunk) if x), default=None)  # (what sdpa_mask calls local_size)
    outs = []
    for b, c in enumerate(lens):
        n = c + new
        qb, kb, vb = q[b:b + 1], k_cache[b:b + 1, :, :n], v_cache[b:b + 1, :, :n]
        at = dict(batch_size=1, q_length=Lq, kv_length=n, q_offset=n - Lq, mask_function=mask_fn, device=q.device)
        if softcap:
            mask = eager_mask(**at, dtype=q.dtype)
            out, _ = gemma2_eager(module, qb, kb, vb, mask, scaling=scaling, softcap=float(softcap))
        elif sinks is not None:
            mask = eager_mask(**at, dtype=q.dtype)
            out, _ = gpt_oss_eager(module, qb, kb, vb, mask, scaling=scaling)
        else:
            mask = sdpa_mask(**at, local_size=local,
                             allow_is_causal_skip=bool(causal), allow_is_bidirectional_skip=not causal)
            out, _ = sdpa_attention_forward(module, qb, kb, vb, mask, scaling=scaling, is_causal=bool(causal))
        outs.append(out.transpose(1, 2))  # (1, Lq, Hq, Ev) -> (1, Hq, Lq, Ev)
    return torch.cat(outs).to(q.dtype)
