"""Planted bug: a fast path skips the window when ``window >= L`` (the QUERY length),
falling back to plain (bottom-right) causal attention. With a KV cache (L < S, e.g.
decoding with L = 1) the window is then never applied.

Real pattern: "window covers the sequence -> use the causal kernel" checks that
compare with the query length instead of the key length (sliding-window-with-cache
bugs in Mistral/Mixtral generation code). Caught by: sliding_window.window_extent.
Message: matches no known convention
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def window_visible(self, L, S, window, device):
        if window >= L:  # BUG: should compare with S (the keys), not L
            p = torch.arange(L, device=device)[:, None] + (S - L)
            return torch.arange(S, device=device)[None, :] <= p
        return super().window_visible(L, S, window, device)


sliding_window_attention = Planted().sliding_window_attention
