"""Planted bug: the softmax normalizes over the queries (dim -2) instead of the keys
(dim -1), so output rows are no longer convex combinations of the values.

Real pattern: ``F.softmax(scores, dim=1)`` / ``nn.Softmax(dim=-2)`` in from-scratch
attention code (and the implicit-dim softmax that torch deprecated for this reason).
Caught by: attention.convex_combination.
Message: not a convex combination
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def softmax(self, scores):
        return super().softmax(scores.transpose(-2, -1)).transpose(-2, -1)  # BUG: over queries


scaled_dot_product_attention = Planted().scaled_dot_product_attention
