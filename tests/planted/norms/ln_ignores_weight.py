"""Planted bug: LayerNorm adds the bias but never multiplies by the weight.

Real pattern: ``F.layer_norm(x, shape, None, self.bias, eps)``: a weight passed as None by mistake.
Caught by: layernorm.affine (random weight set through .weight has no effect).
Message: the weight is ignored
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def affine(self, y):
        return y + self.bias.to(y.dtype) if self.bias is not None else y  # BUG: * weight missing
