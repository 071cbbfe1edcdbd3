"""Hostile target: prints 2 MiB on every call and returns a wrong answer. In-process a session
produced a 226 MB log; the harness keeps the first and last KiB of each call's output."""
import sys

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    sys.stdout.write("FLOOD-START " + "x" * (2 * 2 ** 20) + " FLOOD-END\n")
    return torch.zeros(*query.shape[:-1], value.shape[-1], dtype=query.dtype, device=query.device)
