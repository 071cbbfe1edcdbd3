"""Hostile target: returns a tensor of the wrong shape (a flattened (..., L, H*Ev)
layout, as multi-head modules return)."""
import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
        scale=scale, enable_gqa=enable_gqa)
    return out.transpose(-3, -2).flatten(-2).unsqueeze(-3)  # (..., 1, L, H*Ev)
