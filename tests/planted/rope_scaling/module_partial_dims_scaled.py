"""Planted bug: with a partial rotary factor the pass-through dims are multiplied by the attention
factor too (the factor applied to the whole head after the rotation).

Real pattern: a port that scales q and k by the attention factor after ``apply_rotary_pos_emb``,
where only the rotated dims carry it.
Caught by: scaled_rope_module.passthrough
Message: must pass through untouched
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def table(self, positions, dtype):
        cos, sin = super().table(positions, dtype)
        return (cos / self.att).to(dtype), (sin / self.att).to(dtype)

    def rotate(self, x, cos, sin):
        return super().rotate(x, cos, sin) * self.att  # BUG: pass-through dims scaled too


ScaledRotaryEmbedding = Planted
