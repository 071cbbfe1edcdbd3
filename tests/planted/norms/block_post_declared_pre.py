"""Planted bug: a post-norm block that declares itself pre-norm.

Real pattern: ``nn.TransformerEncoderLayer(..., norm_first=False)`` (torch's default) is
post-norm, used where a pre-norm (GPT-2/Llama-style) block was intended.
Caught by: norm_placement.placement (measured post, declared pre: convention mismatch).
Message: convention mismatch
Message: norm_placement: the code follows post
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import PreNormBlock  # noqa: E402

HARNESS_CONVENTIONS = {"norm_placement": "pre"}


class Block(PreNormBlock):
    def combine(self, x):
        return self.norm(x + self.sublayer(x))  # BUG: this is post-norm


def residual_block(dim, sublayer):
    return Block(dim, sublayer)
