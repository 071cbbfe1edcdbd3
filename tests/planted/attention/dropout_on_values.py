"""Planted bug: dropout is applied to the value rows before ``weights @ v``: one mask per key,
shared by every query, instead of one per attention weight.

Real pattern: a kernel that draws the dropout mask per key block (indexed by the key position
only) rather than per (query, key) element. Caught by: attention.dropout_fresh_masks.
Message: dropout acts on the values
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        if dropout_p > 0.0:  # BUG: the mask depends on the key only
            keep = (torch.rand((*v.shape[:-1], 1), device=v.device) >= dropout_p).to(v.dtype)
            v = v * keep / (1 - dropout_p)
        return super().attend(q, k, v, scale, visible, bias, 0.0)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
