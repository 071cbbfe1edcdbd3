"""Planted bug: the float32 result is returned as float32 whatever the input dtype.

Real pattern: ``softmax(..., dtype=torch.float32)`` upcasts without the matching
``.to(query.dtype)`` (eager attention in several model ports), doubling activation
memory and breaking dtype contracts downstream.
Caught by: attention.agreement (the guard reports "returned dtype").
Message: implementation error
Message: returned dtype torch.float32
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def finish(self, out, query):
        return out.to(torch.float32)  # BUG: should be out.to(query.dtype)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
