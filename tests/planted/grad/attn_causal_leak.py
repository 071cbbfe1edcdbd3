"""Planted bug: the causal backward recomputes P with the mask one key too wide (j <= i + 1).

Real pattern: a tiled causal backward whose mask on the diagonal block is off by one (the
forward kernel masks j > i, the backward kernel j > i + 1), so gradient leaks into the next,
future key; the forward output is right.
Caught by: attention_grad.causal
Message: must be exactly 0
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def backward_probs(self, q, k, scale, visible, bias):
        if visible is not None:
            wider = visible.clone()
            wider[..., 1:] |= visible[..., :-1]  # BUG: each query also "sees" the key after its last
            visible = wider
        return self.probs(q, k, scale, visible, bias)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
