"""Planted bug: the dropout backward draws a fresh keep mask instead of the forward's.

Real pattern: a fused attention kernel that regenerates its dropout mask in the backward from
the RNG (as FlashAttention does, from the saved Philox seed and offset) but does not restore the
forward's RNG state first, so the backward's mask is a new draw: dV and dP see other weights than
the output was computed with; the forward is right and passes every dropout property.
Caught by: attention_grad.dropout_mask
Message: the backward's dropout mask differs from the forward's
Message: not draw a fresh one
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def dropout_backward_multiplier(self, keep, p):
        fresh = torch.rand(keep.shape, device=keep.device) >= p  # BUG: not the forward's mask
        return fresh / (1 - p)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
