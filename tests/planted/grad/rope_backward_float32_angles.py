"""Planted bug: the RoPE backward rebuilds its cos/sin tables from float32 angles.

Real pattern: fused rotary kernels keep the angle (freqs) cache in float32, the cache's default
dtype, and a backward that rebuilds cos/sin from it while the forward got tables in the input's
dtype rotates float64 gradients by angles rounded to float32: at position 6e4 an angle is off by
up to 2e-3, so dx is off far past float64's tolerance, while every float32 and half-precision
gradient is exactly right. A float64 gradcheck names the worst Jacobian element
(position_grad.rope_inverse sees it too, in its float64 examples).
Caught by: position_grad.gradcheck
Message: gradcheck of apply_rotary_embedding
Message: Jacobian mismatch
Message: worst: d output
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def backward_tables(self, cos, sin, ang):
        a = ang.float()  # BUG: the forward's angles are in ang's dtype (float64 for float64 input)
        return a.cos().to(cos.dtype), a.sin().to(sin.dtype)


apply_rotary_embedding = Planted().apply_rotary_embedding
