"""Planted bug: the cos/sin tables are built for rotate-half pairs (i, i + D/2) --
cat(freqs, freqs) -- but the rotation pairs adjacent dims (2i, 2i + 1) as GPT-J does, so
the two dims of a pair turn by different angles: not a rotation at all.

Real pattern: porting a checkpoint between GPT-NeoX/Llama and GPT-J/Meta code, or mixing
HF's ``rotate_half`` tables with an interleaved kernel (the "permute q/k weights" step in
Llama conversion scripts exists because of exactly this).
Caught by: rope.norm (the vectors' norms change).
Message: the norm of each rotated vector
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def rotate(self, x, cos, sin):  # cos/sin: rotate-half tables (..., L, D)
        out = torch.empty_like(x)
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = a * cos[..., 0::2] - b * sin[..., 0::2]  # BUG: interleaved pairs,
        out[..., 1::2] = b * cos[..., 1::2] + a * sin[..., 1::2]  # rotate-half angles
        return out


apply_rotary_embedding = Planted().apply_rotary_embedding
