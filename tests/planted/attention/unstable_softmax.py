"""Planted bug: the softmax does not subtract the row maximum, so exp overflows
(float32: scores above ~88) and the output turns into NaN.

Real pattern: hand-written ``torch.exp(scores) / torch.exp(scores).sum(-1)`` in
from-scratch attention code and naive custom kernels.
Caught by: attention.numerical_range (scores up to +-300).
Message: NaN where the reference is
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def softmax(self, scores):
        w = torch.exp(scores)  # BUG: no max subtraction
        return w / w.sum(dim=-1, keepdim=True)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
