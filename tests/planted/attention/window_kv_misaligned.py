"""Planted bug: keys are shifted by one position relative to the values (the score
for key j uses key j - 1, wrapping around) before the window is applied; which keys
are visible is right, what they score is not.

Real pattern: rolling-buffer KV caches (Mistral's reference ``RotatingBufferCache``)
whose key and value buffers are "unrotated" with different offsets.
Caught by: sliding_window.window_agreement (the one-hot visibility probe, with
Q = K = 0, cannot see it).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def sliding_window_attention(self, query, key, value, window, scale=None):
        key = torch.roll(key, shifts=1, dims=-2)  # BUG: keys and values misaligned by one slot
        return super().sliding_window_attention(query, key, value, window, scale)


sliding_window_attention = Planted().sliding_window_attention
