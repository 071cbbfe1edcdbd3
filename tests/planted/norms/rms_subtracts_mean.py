"""Planted bug: RMSNorm subtracts the mean before taking the root mean square.

Real pattern: an RMSNorm derived from a LayerNorm that kept ``x - x.mean(-1)`` (it is then a
LayerNorm without bias, not an RMSNorm).
Caught by: rmsnorm.no_mean_subtraction (a shifted input gives the unshifted output).
Message: the mean was subtracted
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def mean_square(self, h, dims):
        return (h - h.mean(dim=dims, keepdim=True)).pow(2).mean(dim=dims, keepdim=True)

    def normalize(self, h, ms, eps):
        dims = self.stat_dims(h)
        return (h - h.mean(dim=dims, keepdim=True)) * torch.rsqrt(ms + eps)  # BUG: centres x
