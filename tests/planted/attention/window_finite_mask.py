"""Planted bug: the window is applied as an additive float mask of -1e4, so a key
outside every window whose score is ~1e4 still wins the softmax.

Real pattern: sliding-window masks built additively with a finite constant (-1e4,
the fp16-safe value of older code) instead of -inf / a boolean mask.
Caught by: sliding_window.outside_window (keys outside the window set to +-1e4 leak);
ordinary inputs agree with the reference.
Message: lie outside every window
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def sliding_window_attention(self, query, key, value, window, scale=None):
        vis = self.window_visible(query.shape[-2], key.shape[-2], window, query.device)
        bias = torch.zeros(vis.shape, dtype=torch.float32, device=query.device).masked_fill(~vis, -1e4)  # BUG
        return self.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scale)


sliding_window_attention = Planted().sliding_window_attention
