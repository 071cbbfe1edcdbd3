"""Hostile target: starts a non-daemon thread that never ends (a profiler, a prefetcher). Its
answers are right; in-process the conformance table printed and then the process never exited."""
import threading
import time

import torch

threading.Thread(target=lambda: time.sleep(10 ** 6), daemon=False).start()


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa)
