"""Hostile target: a retry loop that catches ``Exception`` and so swallowed the harness's
in-process call timeout (an exception raised from a signal handler)."""
import time


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    while True:
        try:
            time.sleep(0.05)
        except Exception:  # noqa: BLE001 - the bug: every exception means "retry"
            pass
