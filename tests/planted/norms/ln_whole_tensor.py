"""Planted bug: LayerNorm takes the mean and variance of the whole tensor.

Real pattern: ``x.mean()`` / ``x.std()`` without ``dim=-1, keepdim=True``.
Caught by: layernorm.normalized_dims (changing one token changes every other token).
Message: changed the output of the other tokens
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def stat_dims(self, h):
        return tuple(range(h.dim()))  # BUG: batch and sequence dims included
