"""Hostile target: ``os._exit(0)`` inside the call (a C library calling exit()). In-process it
ended pytest with status 0 and no output, and ``harness run`` said "conformance ok"."""
import os


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    os._exit(0)
