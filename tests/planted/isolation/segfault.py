"""Hostile target: a segfault in native code (a kernel reading a null pointer). In-process it
killed pytest with status 139 and every target's results were lost."""
import ctypes


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    ctypes.string_at(0)
