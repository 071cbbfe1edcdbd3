"""Planted bug: RoPE takes the positions as contiguous from their first entry.

Real pattern: a rotary cache that turns the positions into an offset (``offset = positions[0]``,
rows ``offset .. offset + L - 1``), right for a batch of single documents and for decoding, wrong
for packed documents whose position ids restart at 0: every document after the first is rotated
at its packed row index. Caught by: varlen.rope_packed.
Message: rotated in the packed row
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def rope_positions(self, positions, L):
        start = positions.reshape(-1)[0]
        return start + torch.arange(L, device=positions.device)  # BUG: assumed contiguous


attention_varlen = Planted().attention_varlen
apply_rotary_embedding = Planted().apply_rotary_embedding
