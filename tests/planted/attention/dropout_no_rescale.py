"""Planted bug: dropout zeroes attention weights with probability p but never rescales the kept
ones by 1/(1-p), so the expected output shrinks by (1-p).

Real pattern: a hand-written kernel that applies the Philox keep mask to P and forgets the
``1 / (1 - p)`` factor (or applies it to the wrong tensor). Caught by: attention.dropout_scaling.
Message: kept weights must be 1/(1-p)
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dropout(self, weights, dropout_p: float):
        if dropout_p > 0.0:
            keep = torch.rand(weights.shape, device=weights.device) >= dropout_p
            return weights * keep  # BUG: no / (1 - dropout_p)
        return weights


scaled_dot_product_attention = Planted().scaled_dot_product_attention
