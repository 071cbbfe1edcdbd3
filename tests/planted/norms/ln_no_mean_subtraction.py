"""Planted bug: LayerNorm divides by the standard deviation but never subtracts the mean.

Real pattern: half-converting a LayerNorm into an RMSNorm (or the reverse) by hand.
Caught by: layernorm.shift_scale_invariance (adding a constant changes the output).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def normalize(self, h, mean, var):
        return h * torch.rsqrt(var + self.eps)  # BUG: should be (h - mean)
