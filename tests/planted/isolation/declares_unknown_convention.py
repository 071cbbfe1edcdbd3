"""Hostile target: a broken declaration, ``HARNESS_CONVENTIONS = {"causal_alignment": "bottom_left"}``. It must be named as such, not crash the
session (in-process ``HARNESS_DTYPES = 7`` gave INTERNALERROR)."""
import torch

HARNESS_CONVENTIONS = {"causal_alignment": "bottom_left"}


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                            is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
