"""Planted bug: the window keeps w + 1 keys (FlashAttention's window_size=(w, 0)), undeclared.

Real pattern: the FlashAttention window passed through as the protocol's w (HF issue 29623).
Caught by: varlen.window (a convention mismatch: the code follows w+1).
Message: convention mismatch
Message: window_extent: the code follows w+1
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def reach(self, window):
        return window + 1  # BUG: w + 1 keys


attention_varlen = Planted().attention_varlen
