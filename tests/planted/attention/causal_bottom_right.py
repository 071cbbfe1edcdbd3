"""Planted bug (a convention mismatch): the causal mask is aligned bottom-right
(query i sees keys j <= i + S - L) while the target declares nothing, so the
protocol default (top-left, torch SDPA) applies.

Real pattern: a FlashAttention >= 2.1 kernel (bottom-right since 2.1) wrapped behind
torch's SDPA signature; results differ from torch whenever L != S.
Caught by: attention.causal (convention mismatch). The same code with
HARNESS_CONVENTIONS declared passes (causal_bottom_right_declared.py).
Message: convention mismatch
Message: bottom_right
Message: HARNESS_CONVENTIONS
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def causal_visible(self, L, S, device):
        i = torch.arange(L, device=device)[:, None]
        j = torch.arange(S, device=device)[None, :]
        return j <= i + (S - L)  # bottom-right alignment, undeclared


scaled_dot_product_attention = Planted().scaled_dot_product_attention
