"""Hostile target: the process is SIGKILLed during the call (what the kernel's OOM killer does)."""
import os
import signal


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    os.kill(os.getpid(), signal.SIGKILL)
