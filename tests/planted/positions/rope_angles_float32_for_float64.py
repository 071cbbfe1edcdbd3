"""Planted bug: the angles m * theta are always computed in float32, also for a float64
input, which then gets float32 accuracy: at m = 64k the angle is off by ~5e-3 rad where a
float64 computation is off by ~1e-11.

Real pattern: float32 position * frequency products at long context; every library computes
angles in float32 (so the libraries declare HARNESS_DTYPES without float64), a target that
accepts float64 promises float64 accuracy.
Caught by: rope.long_context (float64 inputs).
Message: input's opmath (float64)
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def angle_dtype(self, x):
        return torch.float32  # BUG: float64 inputs need float64 angles


apply_rotary_embedding = Planted().apply_rotary_embedding
