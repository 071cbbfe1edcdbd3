"""Hostile target: a broken declaration, ``HARNESS_UNSUPPORTED = {"flash"}`` (not a feature the
harness knows). It must be named as such, with the known features listed."""
import torch

HARNESS_UNSUPPORTED = {"flash"}


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                            is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
