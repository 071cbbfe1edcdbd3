"""Planted bug: the attention factor is applied twice (to the tables, and again to the rotated
output), so the rotated dims' norm grows by the factor squared.

Real pattern: Hugging Face applies the factor to cos and sin; a model port that also multiplies the
query (as some YaRN attention code scales q by mscale) applies it twice.
Caught by: scaled_rope_module.norms
Message: expected the attention factor
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def rotate(self, x, cos, sin):
        out = super().rotate(x, cos, sin)
        R = cos.shape[-1]
        return torch.cat((out[..., :R] * self.att, out[..., R:]), dim=-1)  # BUG: the factor again


ScaledRotaryEmbedding = Planted
