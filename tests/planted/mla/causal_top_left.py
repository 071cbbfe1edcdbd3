"""Planted bug: with several new tokens (speculative decoding, multi-token prediction) the causal
mask is aligned top-left: query i sees keys 0 .. i instead of the keys up to its own position
cache_seqlens - Lq + i.

Real pattern: a prefill kernel's causal mask reused for decoding with Lq > 1 (FlashAttention changed
its own alignment to bottom-right in 2.1).
Caught by: mla.agreement
Message: aligned top-left
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def visible(self, Lq, n, causal, device):
        if not causal:
            return torch.ones(Lq, n, dtype=torch.bool, device=device)
        return torch.arange(n, device=device)[None, :] <= torch.arange(Lq, device=device)[:, None]  # BUG


mla_decode = Planted().mla_decode
