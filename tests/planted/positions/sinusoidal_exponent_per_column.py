"""Planted bug: the exponent uses the column index j instead of the pair's 2i
(10000^(-j/d)), so the sin and cos of a pair have different frequencies.

Real pattern: ``position / 10000 ** (j / d)`` for every column j, dropping the ``2 * (j // 2)``
of DistilBERT's ``create_sinusoidal_embeddings``.
Caught by: sinusoidal.relative_inner_product.
Message: not a function of m - n
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Sinusoidal  # noqa: E402


class Planted(Sinusoidal):
    def exponent(self, dim):
        return torch.arange(dim, dtype=torch.float64) / dim  # BUG: should be 2 * (j // 2) / d


sinusoidal_position_embedding = Planted().sinusoidal_position_embedding
