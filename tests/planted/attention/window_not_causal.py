"""Planted bug: the window is symmetric (|j - p| < window), so queries also see up
to window - 1 future keys.

Real pattern: Longformer/BigBird-style bidirectional local attention reused for a
causal decoder. Caught by: sliding_window.window_extent.
Message: matches no known convention
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def window_visible(self, L, S, window, device):
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j - p).abs() < window  # BUG: should be (j <= p) & (j > p - window)


sliding_window_attention = Planted().sliding_window_attention
