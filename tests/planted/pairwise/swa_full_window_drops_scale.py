"""Planted bug: when the window covers every key (window >= S), ``sliding_window_attention``
clamps it to S and takes a causal shortcut that drops an explicit ``scale``.

Real pattern: a "window too large: plain causal attention" shortcut that does not forward all its
arguments.
A narrow window with a scale is right, a wide window with the default scale is right.
Caught by: options_together.sliding_window.
Message: window
Alone: test_sliding_window.py -k test_window_extent
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "attention"))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def sliding_window_attention(self, query, key, value, window, scale=None):
        if window >= key.shape[-2]:
            return super().sliding_window_attention(query, key, value, key.shape[-2])  # BUG: scale not forwarded
        return super().sliding_window_attention(query, key, value, window, scale)


sliding_window_attention = Planted().sliding_window_attention
