"""x-transformers' attention kernel, its ``Attend`` module (``x_transformers.attend``; the part of its
``Attention`` layer after the projections), as ``scaled_dot_product_attention`` and
``attention_with_kvcache``.

    --impl harness.adapters.xtransformers_attention     (pip install x-transformers==2.31.10)

``Attend`` is what every x-transformers model calls with its projected q, k, v: (B, H, N, D)
tensors, a boolean keep ``mask`` or an additive ``attn_bias``, ``causal`` (its own causal mask,
``triu(j - i + 1)``: queries aligned to the end of the keys, and causality off for a single query,
its decoding rule), GQA (its ``repeat`` of the key/value heads), ``softclamp_logits`` (Gemma 2's
softcap, on the scaled logits before the mask), ``head_learned_sink`` (gpt-oss' per-head sink
logit: a column concatenated to the logits, dropped after the softmax) and fully masked rows
zeroed. Its GQA groups query heads strided: ``repeat(k, 'b kvh n d -> b (r kvh) n d')`` gives query head
h the key/value head h mod Hkv, where torch's ``enable_gqa`` (the protocol) gives it h // (Hq / Hkv);
which query heads share a key/value head is a layout of the model's projections, so the adapter
reorders the query heads (and a per-head mask, bias or sink) into x-transformers' order and the
output back. It is called here as its ``Attention`` layer calls it, with ``flash=False`` (x-transformers'
own einsum path; ``flash=True`` hands the math to torch's SDPA, which is ``torch.nn.functional``'s
control). What the adapter does: batch dims flattened into B; a float ``attn_mask`` passed as
``attn_bias``; for ``attention_with_kvcache`` the cache: x-transformers' layer concatenates its
cache, so the new keys and values are written into the protocol's caches and item b's first
``cache_seqlens[b] + Lnew`` keys are handed to ``Attend`` (one call per item, ragged lengths), the
sinks written into its ``head_attn_sink`` parameter as a trained model holds them.

Triaged on the first run: bottom-right causal alignment (named: ``causal_alignment``); and with
more queries than keys (L > S, never the case in its decoding) the first L - S queries see no key
and get the uniform average of the values, while a row emptied by ``mask`` is zeroed: such calls
raise NotImplementedError (unsupported, as xformers' "num_keys >= num_queries" limit is).

Declared: float64 (its softmax runs in float32), dropout (a training-mode ``nn.Dropout``, not the
protocol's seeded draw), autocast; the KV cache's window, paged pools and rotary tables (``Attend``
has none: its layer applies them before).
"""
from __future__ import annotations

import functools

import torch
import x_transformers
from x_transformers.attend import Attend

from harness.adapters import linear_cache

__version__ = getattr(x_transformers, "__version__", "2.x")
HARNESS_DTYPES = ("float32", "float16", "bfloat16")
HARNESS_UNSUPPORTED = {"dropout", "autocast", "kvcache_window", "kvcache_paged", "kvcache_rotary"}
HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}


@functools.lru_cache(maxsize=32)
def _attend(causal: bool, scale: float | None, softcap: float | None, sink_heads: int | None) -> Attend:
    attend = Attend(causal=causal, scale=scale, flash=False, softclamp_logits=softcap is not None,
                    logit_softclamp_value=softcap if softcap is not None else 50.0,
                    head_learned_sink=sink_heads is not None, heads=sink_heads)
    return attend.eval()


def _heads(t: torch.Tensor | None, hkv: int, back: bool = False) -> torch.Tensor | None:
    """The (B, Hq, ...) head dim of ``t`` from the protocol's grouping (query head h with key/value head
    h // r) into x-transformers' (h mod Hkv), or ``back``; a size-1 head dim is left as it is."""
    if t is None or t.dim() < 3 or t.shape[1] in (1, hkv):
        return t
    rest, r = t.shape[2:], t.shape[1] // hkv
    split = (hkv, r) if not back else (r, hkv)
    return t.reshape(t.shape[0], *split, *rest).transpose(1, 2).reshape(t.shape)


def _call(q, k, v, *, causal=False, scale=None, mask=None, bias=None, softcap=None, sinks=None) -> torch.Tensor:
    hkv = k.shape[1]
    q, mask, bias = _heads(q, hkv), _heads(mask, hkv), _heads(bias, hkv)
    if sinks is not None:
        sinks = _heads(sinks[None, :, None], hkv)[0, :, 0]
    attend = _attend(bool(causal), None if scale is None else float(scale), None if not softcap else float(softcap),
                     None if sinks is None else sinks.shape[0])
    if sinks is not None:
        with torch.no_grad():
            attend.head_attn_sink.copy_(sinks)
    out, _ = attend(q, k, v, mask=mask, attn_bias=bias)
    return _heads(out, hkv, back=True)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, *t.shape[-3:])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    if dropout_p:
        raise NotImplementedError("Attend's dropout is a training-mode nn.Dropout (declared)")
    if query.shape[-3] != key.shape[-3] and not enable_gqa:
        raise ValueError("query and key have different head counts: pass enable_gqa=True")
    batch, (hq, L, S) = query.shape[:-3], (query.shape[-3], query.shape[-2], key.shape[-2])
    if is_causal and L > S:
        raise NotImplementedError("Attend's causal mask with more queries than keys: its first L - S queries see "
                                  "no key and are attended uniformly (it zeroes rows masked by `mask` only)")
    mask = bias = None
    if attn_mask is not None:  # always 4-D: Attend reads a 2-D mask as a (B, S) key padding mask
        full = _flat(attn_mask.expand(*batch, hq, L, S))
        mask, bias = (full, None) if full.dtype == torch.bool else (None, full.to(query.dtype))
    out = _call(_flat(query), _flat(key), _flat(value), causal=is_causal, scale=scale, mask=mask, bias=bias)
    return out.reshape(*batch, hq, L, value.shape[-1])


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, block_table=None,
                           softcap=None, sinks=None):
    if window is not None or block_table is not None or rotary_cos is not None:
        raise NotImplementedError("Attend takes no window, page table or rotary tables (declared)")
    lens, new = linear_cache.append(k_cache, v_cache, k, v, cache_seqlens,
                                    "a rolling cache: x-transformers' cache concatenates (no window)")
    return torch.cat([_call(q[b:b + 1], k_cache[b:b + 1, :, :c + new], v_cache[b:b + 1, :, :c + new], causal=causal,
                            scale=scale, softcap=softcap, sinks=sinks) for b, c in enumerate(lens)])
