"""Hugging Face transformers' eager attention math (Llama's ``eager_attention_forward``)
exposed as ``scaled_dot_product_attention``.

    query (..., Hq, L, E), key/value (..., Hkv, S, E|Ev) -> (..., Hq, L, Ev)

HF eager attention takes 4-D (B, H, L, E) tensors, an *additive* float mask and a
module carrying ``num_key_value_groups``; it returns (B, L, H, Ev). The adapter
converts boolean masks and ``is_causal`` (top-left, as torch) the way HF's own mask
builders do: masked positions get ``torch.finfo(dtype).min``. That finite constant
makes fully masked rows attend uniformly (a named convention, not a bug). The
softmax runs in float32 (upcast from half precision, *downcast* from float64), so
the adapter declares ``HARNESS_DTYPES`` without float64.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from transformers.models.llama.modeling_llama import eager_attention_forward

HARNESS_CONVENTIONS = {"causal_alignment": "top_left", "fully_masked_rows": "uniform"}
#: Llama's eager softmax runs in float32 whatever the input dtype: a float64 input loses
#: precision there (and finfo(float64).min becomes -inf), so float64 is not claimed.
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


def additive_mask(attn_mask, is_causal, L, S, dtype, device):
    """Bool/float mask and causal flag as one additive mask (or None)."""
    neg = torch.finfo(dtype).min
    add = None
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=device).tril()
        add = torch.zeros(L, S, dtype=dtype, device=device).masked_fill(~keep, neg)
    if attn_mask is not None:
        m = (torch.zeros(attn_mask.shape, dtype=dtype, device=device).masked_fill(~attn_mask, neg)
             if attn_mask.dtype == torch.bool else attn_mask.to(dtype))
        add = m if add is None else add + m
    return add


def hf_sdpa(eager_fn, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
            scale=None, enable_gqa=False):
    *batch, hq, L, E = query.shape
    hkv, S, Ev = key.shape[-3], key.shape[-2], value.shape[-1]
    if hq != hkv and not enable_gqa:
        raise ValueError("query and key head counts differ; pass enable_gqa=True")
    B = math.prod(batch) if batch else 1
    q = query.reshape(B, hq, L, E)
    k = key.reshape(B, hkv, S, E)
    v = value.reshape(B, hkv, S, Ev)
    mask = additive_mask(attn_mask, is_causal, L, S, query.dtype, query.device)
    if mask is not None:
        mask = mask.expand(*batch, hq, L, S).reshape(B, hq, L, S)
    module = SimpleNamespace(num_key_value_groups=hq // hkv, training=dropout_p > 0)
    scaling = 1.0 / math.sqrt(E) if scale is None else scale
    out, _ = eager_fn(module, q, k, v, mask, scaling=scaling, dropout=dropout_p)  # (B, L, Hq, Ev)
    return out.transpose(1, 2).reshape(*batch, hq, L, Ev)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return hf_sdpa(eager_attention_forward, query, key, value, attn_mask, dropout_p,
                   is_causal, scale, enable_gqa)
