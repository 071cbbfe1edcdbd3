"""Planted bug: past the first 64-row tile, the last (partial) tile of queries is read from batch
item 0, whatever the item.

Real pattern: a tiled kernel whose tail tile computes its base pointer without the batch stride.
One batch item at any length is right; several items below 64 queries are right: only several
items with L past a tile (and not a multiple of it) are wrong. Caught by: options_together.sdpa.
Message: against the float64 reference
Alone: test_attention.py -k test_agreement
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "attention"))
from _base import Attention  # noqa: E402

TILE = 64


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        L = q.shape[-2]
        tail = L - L % TILE
        if L <= TILE or tail == L or q.dim() < 4 or q.shape[0] == 1:
            return super().attend(q, k, v, scale, visible, bias, dropout_p)
        q = q.clone()
        q[1:, ..., tail:, :] = q[:1, ..., tail:, :]  # BUG: the tail tile read from item 0
        return super().attend(q, k, v, scale, visible, bias, dropout_p)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
