"""Planted bug: LayerNorm applies the weight but never adds the bias.

Real pattern: a custom fused kernel or a port that drops ``+ beta`` (checkpoint biases are then
loaded and silently unused).
Caught by: layernorm.affine (random bias set through .bias has no effect).
Message: the bias is ignored
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def affine(self, y):
        return y * self.weight.to(y.dtype) if self.weight is not None else y  # BUG: + bias missing
