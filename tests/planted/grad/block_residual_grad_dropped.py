"""Planted bug: the residual block's backward drops the residual path's identity gradient.

Real pattern: fused add + norm kernels (Apex's FusedAddRMSNorm, FlashAttention's
dropout_add_layer_norm, Liger's fused residual kernels) return the residual stream's gradient as a
separate output (dresidual); a block whose backward passes on only the gradient through the
norm and the sublayer, dx = J^T g instead of g + J^T g, trains a network whose skip connections
carry no gradient. The forward x + f(norm(x)) is right and passes norm_placement.placement.
Caught by: norm_grad.residual_block
Message: dx of residual_block
Message: identity gradient
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import PreNormBlock  # noqa: E402


class Block(PreNormBlock):
    def residual_dx(self, g):
        return torch.zeros_like(g)  # BUG: the residual path's gradient is g


def residual_block(dim, sublayer):
    return Block(dim, sublayer)
