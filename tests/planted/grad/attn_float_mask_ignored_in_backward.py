"""Planted bug: the backward recomputes P without the float mask (the forward adds it).

Real pattern: an additive bias (ALiBi, relative positions) passed to the forward kernel but not
to the backward kernel that recomputes the probabilities.
Caught by: attention_grad.float_mask
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def backward_probs(self, q, k, scale, visible, bias):
        return self.probs(q, k, scale, visible, None)  # BUG: the bias is dropped


scaled_dot_product_attention = Planted().scaled_dot_product_attention
