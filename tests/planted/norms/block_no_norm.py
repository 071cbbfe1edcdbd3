"""Planted bug: the residual block builds a norm but never applies it: x + f(x).

Real pattern: a refactor that moved the norm call out of the block (or a ``norm_first`` flag
path that skips it), leaving an un-normalized residual stream.
Caught by: norm_placement.placement (f sees x itself and the output is not normalized:
neither pre- nor post-norm).
Message: norm_placement: the behaviour matches no known convention
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import PreNormBlock  # noqa: E402


class Block(PreNormBlock):
    def combine(self, x):
        return x + self.sublayer(x)  # BUG: self.norm is never used


def residual_block(dim, sublayer):
    return Block(dim, sublayer)
