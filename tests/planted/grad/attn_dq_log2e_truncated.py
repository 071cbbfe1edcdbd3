"""Planted bug: dQ's scale goes through a truncated log2(e) (1.44270), about 3.4e-6 too large.

Real pattern: FlashAttention-style kernels fold the softmax scale into exp2 as scale * log2(e); a
backward that writes the constant with six digits and converts back with the exact one is off by
a few parts in a million in dQ only: inside the float32/half tolerance (the floor alone is 2e-6 of
the largest gradient in float32), visible to a float64 gradcheck (attention_grad.agreement sees it
too, but only in its float64 examples, for a target that supports float64).
Caught by: attention_grad.gradcheck
Message: Jacobian mismatch for output 0 with respect to input 0
Message: worst: d output
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

LOG2E = 1.44270  # BUG: math.log2(math.e) = 1.4426950408889634


class Planted(Attention):
    def dq(self, dS, k, scale):
        return (dS @ k) * (scale * LOG2E) / math.log2(math.e)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
