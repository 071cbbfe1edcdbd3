"""Planted bug: the pre-norm block drops the residual connection: f(norm(x)).

Real pattern: ``h = self.attn(self.norm(x))`` returned without ``x + h``.
Caught by: norm_placement.placement (a zero sublayer gives 0 instead of x: no known placement).
Message: norm_placement: the behaviour matches no known convention
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import PreNormBlock  # noqa: E402


class Block(PreNormBlock):
    def combine(self, x):
        return self.sublayer(self.norm(x))  # BUG: x + missing


def residual_block(dim, sublayer):
    return Block(dim, sublayer)
