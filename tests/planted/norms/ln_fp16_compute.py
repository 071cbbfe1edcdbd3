"""Planted bug: LayerNorm computes its statistics in the input dtype (no upcast).

Real pattern: hand-written LayerNorms run under ``model.half()``: (x - mean)^2 overflows float16
above 256, the variance becomes inf and the output collapses to 0 (or NaN).
Caught by: layernorm.large_values (float16 inputs in the thousands).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def compute_dtype(self, x):
        return x.dtype  # BUG: half inputs need float32 statistics
