"""Planted bug: dV is computed from the probabilities of the *unmasked* scores.

Real pattern: a backward that recomputes P for dV = P^T dO without re-applying the mask (the
forward masks, the backward tile loop for dV does not); masked keys then receive gradient.
Caught by: attention_grad.bool_mask
Message: dv of masked keys
Message: must be exactly 0
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dv(self, P, dO, q, k, scale, bias):
        unmasked = self.probs(q, k, scale, None, bias)  # BUG: the boolean mask is not re-applied
        return unmasked.transpose(-2, -1) @ dO


scaled_dot_product_attention = Planted().scaled_dot_product_attention
