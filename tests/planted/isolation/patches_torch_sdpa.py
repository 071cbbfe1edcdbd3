"""Hostile target: replaces ``torch.nn.functional.scaled_dot_product_attention`` with a broken
function (a monkey-patching "accelerator"). In-process, ``--impl torch.nn.functional`` in the
same session then tested the patched function and got its column failed."""
import torch
import torch.nn.functional as F

_real = F.scaled_dot_product_attention


def _broken(query, key, value, *args, **kwargs):
    return torch.zeros_like(_real(query, key, value, *args, **kwargs))


F.scaled_dot_product_attention = _broken
torch._C._nn.scaled_dot_product_attention = _broken


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return _real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                 scale=scale, enable_gqa=enable_gqa)
