"""Planted bug: LayerNorm takes the statistics over the last dim only, whatever normalized_shape says.

Real pattern: a hand-written LayerNorm with hard-coded ``mean(-1)`` / ``var(-1)`` that
accepts a normalized_shape tuple (e.g. (H, D) for per-head norms) and ignores all but its end.
Caught by: layernorm.normalized_dims (a change in another row of the token is not felt).
Message: must span all of normalized_shape
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def stat_dims(self, h):
        return (h.dim() - 1,)  # BUG: should span all of normalized_shape
