"""Hugging Face BERT's eager attention math exposed as ``scaled_dot_product_attention``
(same conversion as ``harness.adapters.hf_attention``; BERT has no GQA, so KV heads are
expanded before the call)."""
from __future__ import annotations

from transformers.models.bert.modeling_bert import eager_attention_forward

from harness.adapters.hf_attention import hf_sdpa

HARNESS_CONVENTIONS = {"causal_alignment": "top_left", "fully_masked_rows": "uniform"}


def _bert_eager(module, q, k, v, mask, scaling, dropout=0.0):
    group = module.num_key_value_groups
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return eager_attention_forward(module, q, k, v, mask, scaling=scaling, dropout=dropout)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return hf_sdpa(_bert_eager, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
