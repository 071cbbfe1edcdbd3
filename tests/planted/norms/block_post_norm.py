"""Control (not a bug): a post-norm block, norm(x + f(x)), reported by name.

Real pattern: Vaswani et al. 2017, BERT, torch's nn.TransformerEncoderLayer(norm_first=False).
Passes: norm_placement.placement with the label convention:post.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import PreNormBlock  # noqa: E402


class Block(PreNormBlock):
    def combine(self, x):
        return self.norm(x + self.sublayer(x))


def residual_block(dim, sublayer):
    return Block(dim, sublayer)
