"""Planted bug: the forward returns zeros for a query whose keys are all masked, but the backward
recomputes P for that row without the mask (a fully masked row's saved statistics are replaced by a
finite value, so P = softmax of the row's raw scores): its dq is not 0 and it sends gradient into
every key's dk and dv.

Real pattern: a fused kernel that saves the log-sum-exp and clamps the -inf of an empty row to 0
(or recomputes the scores unmasked for it) to avoid NaN in the backward; the forward's zeros hide it.
Caught by: attention_grad.fully_masked_rows
Message: dq of the fully masked rows
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def backward_probs(self, q, k, scale, visible, bias):
        if visible is None:
            return self.probs(q, k, scale, visible, bias)
        empty = ~visible.any(-1, keepdim=True)  # rows with no visible key
        return self.probs(q, k, scale, visible | empty, bias)  # BUG: those rows unmasked in the backward


scaled_dot_product_attention = Planted().scaled_dot_product_attention
