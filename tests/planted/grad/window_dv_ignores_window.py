"""Planted bug: dV of the sliding window uses the softmax over every key (the window ignored).

Real pattern: a sliding-window kernel whose block skipping is implemented in the forward and the
dQ/dK kernels but not in the separate dV kernel, which iterates over all key blocks with no band
mask; the forward output, dQ and dK are right.
Caught by: window_grad.agreement
Message: dv (window=
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dv(self, P, dO, q, k, scale, bias):
        unwindowed = self.probs(q, k, scale, None, bias)  # BUG: no window mask
        return unwindowed.transpose(-2, -1) @ dO


sliding_window_attention = Planted().sliding_window_attention
