"""Planted bug: GQA dK/dV take only the first query head of each group instead of the sum.

Real pattern: a GQA backward that writes dK/dV per query head into a KV-head-sized buffer (the
last or first writer wins) instead of accumulating over the group (FlashAttention sums the
expanded dk/dv over the group with a reshape + sum).
Caught by: attention_grad.gqa
Message: the backward must sum over the query group
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def reduce_group(self, d, group):
        return d.unflatten(-3, (d.shape[-3] // group, group))[..., 0, :, :]  # BUG: not summed


scaled_dot_product_attention = Planted().scaled_dot_product_attention
