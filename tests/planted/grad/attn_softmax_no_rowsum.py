"""Planted bug: the softmax backward drops the row-sum term: dS = P * dP instead of
P * (dP - rowsum(P * dP)).

Real pattern: a hand-written attention backward that differentiates softmax as if it were an
elementwise exp (the "D_i = rowsum(dO * O)" preprocessing kernel of FlashAttention left out).
Caught by: attention_grad.value_shift
Message: after adding c =
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def softmax_backward(self, P, dP):
        return P * dP  # BUG: - rowsum(P * dP) missing


scaled_dot_product_attention = Planted().scaled_dot_product_attention
