"""Control (not a bug): Gemma's (1 + weight) scale, declared as the named convention; the weight
starts at zeros, so the fresh module is the identity scale.

Real pattern: Gemma, Gemma 2/3 RMSNorm.
Passes: every rmsnorm property, rmsnorm.weight with the label convention:one_plus_weight.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402

HARNESS_CONVENTIONS = {"rmsnorm_scale": "one_plus_weight"}


class RMSNorm(Base):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine)
        if self.weight is not None:
            torch.nn.init.zeros_(self.weight)

    def scale(self, y):
        return y if self.weight is None else y * (1 + self.weight.to(y.dtype))
