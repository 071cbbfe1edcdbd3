"""Planted bug: attention dropout with a hard-coded p=0.1 through ``F.dropout``,
whose ``training`` argument defaults to True, so it is applied even with dropout_p=0.

Real pattern: ``F.dropout(attn, p=config.attention_dropout)`` without
``training=self.training`` -- dropout at inference, non-deterministic outputs.
Caught by: attention.dropout_zero.
Message: dropout_p=0.0
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dropout(self, weights, dropout_p):
        return torch.nn.functional.dropout(weights, p=0.1)  # BUG: training=True by default; p ignored


scaled_dot_product_attention = Planted().scaled_dot_product_attention
