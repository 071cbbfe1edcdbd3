"""Planted bug: dropout is applied to the attention *output* instead of the attention weights.

Real pattern: ``nn.Dropout`` moved after ``attn @ v`` while refactoring an attention block into a
fused call (the residual dropout and the attention dropout confused). Its keep rate and scale are
right, so only where the mask acts tells. Caught by: attention.dropout_on_weights.
Message: acts on the output or on the values
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        out = super().attend(q, k, v, scale, visible, bias, 0.0)
        if dropout_p > 0.0:  # BUG: on the output, not on the weights
            out = torch.nn.functional.dropout(out, p=dropout_p, training=True)
        return out


scaled_dot_product_attention = Planted().scaled_dot_product_attention
