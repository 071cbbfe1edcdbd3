"""Planted bug: the RoPE backward rotates the upstream gradient forward, R(m) g, not back.

Real pattern: a fused RoPE kernel whose backward reuses the forward kernel with the same sin
(the transpose of a rotation needs -sin); per-pair norms are still preserved.
Caught by: position_grad.rope_inverse
Message: RoPE(dx)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope, rotate_half  # noqa: E402


class Planted(Rope):
    def rope_backward(self, g, cos, sin):
        return g * cos + rotate_half(g) * sin  # BUG: +sin, the forward rotation


apply_rotary_embedding = Planted().apply_rotary_embedding
