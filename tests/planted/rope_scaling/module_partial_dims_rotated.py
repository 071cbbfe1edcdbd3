"""Planted bug: with a partial rotary factor the module rotates every dim of the head anyway, the
frequencies computed over the rotary dim R and repeated to fill the head dim.

Real pattern: a port of a partial-rotary model (GPT-NeoX, Phi, GLM) that drops the split into
``q_rot, q_pass`` and applies cos and sin tiled to the full head dim.
Caught by: scaled_rope_module.passthrough
Message: must pass through untouched
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def rotate(self, x, cos, sin):
        D, R = x.shape[-1], cos.shape[-1]
        reps = -(-D // R)
        cos, sin = cos.repeat(1, reps)[..., :D], sin.repeat(1, reps)[..., :D]  # BUG: tables tiled over the head
        half = torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)
        return x * cos + half * sin


ScaledRotaryEmbedding = Planted
