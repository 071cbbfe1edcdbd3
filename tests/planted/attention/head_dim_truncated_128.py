"""Planted bug: head dims above 128 are computed on the first 128 dims only (the scores ignore
the rest of q and k), and the output's extra value dims are taken from the right place.

Real pattern: a kernel compiled with ``BLOCK_DMODEL = min(128, next_power_of_2(E))`` that loops
once over the head dim, so E = 160 or 256 silently drops dims 128.. of the dot product.
Caught by: attention.agreement.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

BLOCK_D = 128


class Planted(Attention):
    def scores(self, q, k, scale):
        return (q[..., :BLOCK_D] @ k[..., :BLOCK_D].transpose(-2, -1)) * scale  # BUG: E > 128 truncated


scaled_dot_product_attention = Planted().scaled_dot_product_attention
