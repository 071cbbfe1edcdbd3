"""Planted bug: windows wider than 128 keys are applied at tile granularity: the lower bound of
the window is rounded down to a multiple of 64, so up to 63 keys too many are seen; windows of
at most 128 keys are exact.

Real pattern: a block-sparse sliding-window kernel that skips whole key blocks outside the window
but forgets the element-wise mask in the first partially covered block, on its large-window path.
Caught by: sliding_window.window_extent.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

BLOCK_N = 64


class Planted(Attention):
    def window_visible(self, L: int, S: int, window: int, device):
        if window <= 128:
            return super().window_visible(L, S, window, device)
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        lower = torch.div(p - window + 1, BLOCK_N, rounding_mode="floor") * BLOCK_N  # BUG: block-rounded
        return (j <= p) & (j >= lower)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
sliding_window_attention = Planted().sliding_window_attention
