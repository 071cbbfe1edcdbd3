"""Hostile target: calls ``sys.exit`` (a library that exits on an unsupported device).

The session must survive it and keep testing the other targets."""
import sys


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    sys.exit(3)
