"""Planted bug: an explicit ``scale`` is accepted but ignored; 1/sqrt(E) is always used.

Real pattern: wrappers that take ``scale`` / ``softmax_scale`` and never forward it
to the kernel (e.g. code written against torch SDPA before 2.1, which had no
``scale`` parameter). Caught by: attention.scale.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def resolve_scale(self, scale, query, key, value):
        return self.default_scale(query, key, value)  # BUG: the explicit scale is dropped


scaled_dot_product_attention = Planted().scaled_dot_product_attention
