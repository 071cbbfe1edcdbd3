"""Planted bug: the dropout backward applies the keep mask without the 1/(1 - p) rescale.

Real pattern: a hand-written backward that reuses the saved boolean keep mask (dV = (P * D)^T dO,
dP = (dO V^T) * D) and forgets that the forward multiplied the kept weights by 1/(1 - p): every
gradient through the weights is (1 - p) times too small; the forward is right.
Caught by: attention_grad.dropout_scaling
Message: S * dV^T
Message: must be rescaled by 1/(1-p)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dropout_backward_multiplier(self, keep, p):
        return keep  # BUG: keep / (1 - p)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
