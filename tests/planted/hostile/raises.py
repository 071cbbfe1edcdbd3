"""Hostile target: every call raises (an unsupported-shape assertion in a kernel)."""


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    raise ValueError("hostile target: this kernel supports no shapes at all")
