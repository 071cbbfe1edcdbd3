"""Planted bug: dK is not multiplied by the softmax scale (dQ is).

Real pattern: FlashAttention-style backwards that fold the scale into Q for the forward and
forget that dK = dS^T Q needs it too (the scale then only enters through dQ).
Caught by: attention_grad.scale
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dk(self, dS, q, scale):
        return dS.transpose(-2, -1) @ q  # BUG: * scale missing


scaled_dot_product_attention = Planted().scaled_dot_product_attention
