"""Planted bug: ``dropout_p`` is accepted and ignored, so training runs without attention dropout.

Real pattern: a fused kernel wrapper whose signature mirrors torch's SDPA but never forwards
``dropout_p`` to the kernel (the value is silently dropped). Caught by: attention.dropout_keep_rate.
Message: dropout_p is ignored
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dropout(self, weights, dropout_p: float):
        return weights  # BUG: dropout_p never applied


scaled_dot_product_attention = Planted().scaled_dot_product_attention
