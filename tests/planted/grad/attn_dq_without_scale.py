"""Planted bug: dQ is not multiplied by the softmax scale (dK is).

Real pattern: the mirror of the dK bug: a backward that scales the scores gradient once for dK and
reuses the unscaled one for dQ = dS K.
Caught by: attention_grad.agreement
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dq(self, dS, k, scale):
        return dS @ k  # BUG: * scale missing


scaled_dot_product_attention = Planted().scaled_dot_product_attention
