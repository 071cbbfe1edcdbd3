"""Planted bug (a convention mismatch): the window includes one key too many
(p - window <= j <= p, window + 1 keys) and the target declares nothing.

Real pattern: FlashAttention's ``window_size=(w, 0)`` sees w + 1 keys; passing a
model's ``sliding_window`` straight through (instead of ``sliding_window - 1``) was a
real off-by-one in Mistral ports. Caught by: sliding_window.window_extent.
The same code declared (window_w_plus_one_declared.py) passes.
Message: window_extent: the code follows w+1
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
        return (j <= p) & (j >= p - window)  # w + 1 keys, undeclared


sliding_window_attention = Planted().sliding_window_attention
