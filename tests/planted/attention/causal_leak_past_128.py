"""Planted bug: in query rows at or past 128 (the second 128-row tile), the causal mask lets one
future key through (the diagonal tile's bound is off by one after the first tile).

Real pattern: a tiled causal kernel whose per-tile mask uses ``start_m`` of the first tile, or
``<=`` against ``offs_m + 1``, only for tiles past the first: right on every sequence shorter than
one tile. Caught by: attention.causal.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

TILE = 128


class Planted(Attention):
    def causal_visible(self, L: int, S: int, device):
        i = torch.arange(L, device=device)[:, None]
        j = torch.arange(S, device=device)[None, :]
        return j <= i + (i >= TILE).long()  # BUG: one future key leaks past the first tile


scaled_dot_product_attention = Planted().scaled_dot_product_attention
