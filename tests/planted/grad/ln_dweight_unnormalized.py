"""Planted bug: LayerNorm dweight is sum(g * x) instead of sum(g * xhat).

Real pattern: a fused backward that reads the saved *input* where it should read the saved
normalized activations (both are kept for the backward; the names differ by one letter).
Caught by: norm_grad.layernorm
Message: dweight of LayerNorm
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def ln_dweight(self, g, xhat, h):
        return g * h  # BUG: x instead of xhat
