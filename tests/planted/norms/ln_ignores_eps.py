"""Planted bug: LayerNorm ignores the eps it was constructed with and uses 1e-5.

Real pattern: ``F.layer_norm(x, self.normalized_shape, self.weight, self.bias)`` without
``self.eps`` (F.layer_norm's default is 1e-5), e.g. a model configured with eps=1e-6 or 1e-12.
Caught by: layernorm.eps_honoured (inputs whose variance is about eps).
Message: the constructor's eps is ignored
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def normalize(self, h, mean, var):
        return (h - mean) * torch.rsqrt(var + 1e-5)  # BUG: should be self.eps
