"""Planted bug: the angles m * theta are computed in bfloat16 (8 mantissa bits): at
position 60000 one ulp is 256 radians, so the rotation is noise.

Real pattern: Hugging Face transformers#25681 (LlamaRotaryEmbedding's cache wrong after
``model.to(torch.bfloat16)``) and #29285 ("RoPE loses precision for Llama / Gemma": angles
autocast to bfloat16), fixed by forcing float32 angles.
Caught by: rope.long_context.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def angle_dtype(self, x):
        return torch.bfloat16  # BUG: should be float32 (float64 for float64 x)


apply_rotary_embedding = Planted().apply_rotary_embedding
