"""Planted bug: the default scale is 1/E instead of 1/sqrt(E).

Real pattern: ``head_dim ** -1`` typed for ``head_dim ** -0.5``, or muP's 1/d
attention scaling leaking into a model that expects 1/sqrt(d).
Caught by: attention.scale.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def default_scale(self, query, key, value):
        return 1.0 / query.shape[-1]  # BUG: should be 1 / sqrt(E)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
