"""Planted bug: the sliding-window backward recomputes P with a window one key wider than the
forward's (the key just before each query's first also counts).

Real pattern: a tiled sliding-window backward whose left band edge is ``j >= p - w`` where the
forward kernel has ``j > p - w`` (the w vs w+1 convention mixed up between the two kernels), so
gradient leaks into a key the forward never read; the forward output is right.
Caught by: window_grad.outside_window
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def backward_probs(self, q, k, scale, visible, bias):
        wider = visible.clone()
        wider[..., :-1] |= visible[..., 1:]  # BUG: each query also "sees" the key before its first
        return self.probs(q, k, scale, wider, bias)


sliding_window_attention = Planted().sliding_window_attention
