"""Planted bug: the attention factor (YaRN's mscale, LongRoPE's) multiplies the cos table only: the
"rotation" is no longer one, and q . k depends on the absolute positions.

Real pattern: a port that scales ``cos_cached`` where the model scaled both tables (or caches sin
before the factor is applied).
Caught by: scaled_rope_module.relative
Message: is not a function of m - n
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def table(self, positions, dtype):
        cos, sin = super().table(positions, dtype)
        return cos, (sin / self.att).to(dtype)  # BUG: sin without the attention factor


ScaledRotaryEmbedding = Planted
