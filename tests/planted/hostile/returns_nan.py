"""Hostile target: right shape and dtype, every element NaN."""
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return torch.full((*query.shape[:-1], value.shape[-1]), float("nan"), dtype=query.dtype)
