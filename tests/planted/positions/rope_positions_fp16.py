"""Planted bug: positions are cast to float16 before multiplying by theta: above
2048 they are rounded (ulp 32 at 32768) and from 65520 on they are inf, so cos/sin are NaN.

Real pattern: ``position_ids.to(x.dtype)`` in a half-precision model (the same family of
bugs as HF transformers#25681), also ``t = torch.arange(seq_len, dtype=inv_freq.dtype)`` with
a float16 ``inv_freq`` buffer after ``model.half()``.
Caught by: rope.long_context.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def angles(self, positions, inv_freq, dtype):
        return (positions.half()[..., None] * inv_freq).to(dtype)  # BUG: positions in float16


apply_rotary_embedding = Planted().apply_rotary_embedding
