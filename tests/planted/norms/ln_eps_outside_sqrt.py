"""Planted bug: LayerNorm adds eps to the standard deviation, outside the square root.

Real pattern: ``(x - mean) / (x.std(-1) + eps)`` (the Annotated Transformer, many tutorials).
Caught by: layernorm.eps_inside_sqrt ([1, 0, 0, 0] with eps=0.5 is off the textbook value).
Message: eps is outside the square root
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def normalize(self, h, mean, var):
        return (h - mean) / (var.sqrt() + self.eps)  # BUG: eps belongs inside the square root
