"""Hostile target: never returns (a deadlocked kernel, a busy-wait on a device).

The harness must interrupt each call after ``--impl-timeout`` seconds and report
"did not return within the per-call limit".
"""
import time


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    time.sleep(3600)
