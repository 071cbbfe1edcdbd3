"""Planted bug: ``sliding_window_attention`` caches its band mask by (L, S) only, so the same
shapes with another window reuse the first window's band. Each call in a fresh process is right.

Real pattern: a mask cache ``self._masks[(q_len, k_len)]`` (or ``functools.lru_cache`` over a
helper that reads the window from a config captured at the first call), shared by layers with
different windows (Gemma 2 / Mistral variants alternate local and global layers).
Caught by: history.sliding_window_attention (the first call again with another window).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def __init__(self):
        self.masks = {}

    def window_visible(self, L, S, window, device):
        key = (L, S, str(device))  # BUG: the window is not in the key
        if key not in self.masks:
            self.masks[key] = super().window_visible(L, S, window, device)
        return self.masks[key]


sliding_window_attention = Planted().sliding_window_attention
