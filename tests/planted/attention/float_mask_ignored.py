"""Planted bug: a float (additive) mask is silently ignored; only boolean masks work.

Real pattern: wrappers around kernels that accept only boolean / key-padding masks
(or only ``is_causal``) and drop any other ``attn_mask`` (additive ALiBi or padding
biases then vanish without an error). Caught by: attention.float_mask.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def float_bias(self, attn_mask, scores):
        return None  # BUG: the additive mask is dropped


scaled_dot_product_attention = Planted().scaled_dot_product_attention
