"""Planted bug: the RoPE backward passes the upstream gradient through unrotated (dx = g).

Real pattern: a RoPE applied in place under torch.no_grad() or through .data, with the gradient
"straight through" as if the rotation were the identity.
Caught by: position_grad.rope_dx
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def rope_backward(self, g, cos, sin):
        return g  # BUG: the rotation is not transposed, it is dropped


apply_rotary_embedding = Planted().apply_rotary_embedding
