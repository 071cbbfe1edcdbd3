"""The reference residual block with one norm, for the norm-placement property.

    x (..., dim) -> (..., dim)
    pre-norm  (GPT-2, Llama):            x + sublayer(norm(x))
    (post-norm, norm(x + sublayer(x)) as in Vaswani et al. 2017 and BERT, is a placement the suite
    recognizes and reports by name in a target: the control tests/planted/norms/block_post_norm.py)

``sublayer`` is any nn.Module (..., dim) -> (..., dim) (attention, an FFN, or
the harness's probe); ``norm`` defaults to a fresh ``reference.layernorm.LayerNorm(dim)``.
The protocol name ``residual_block`` is the pre-norm factory.
"""
from __future__ import annotations

from torch import nn

from harness.reference.layernorm import LayerNorm


class PreNormBlock(nn.Module):
    def __init__(self, dim, sublayer, norm=None):
        super().__init__()
        self.norm = LayerNorm(dim) if norm is None else norm
        self.sublayer = sublayer

    def forward(self, x):
        return x + self.sublayer(self.norm(x))


def pre_norm_block(dim, sublayer):
    return PreNormBlock(dim, sublayer)


#: the protocol name: the modern pre-norm placement
residual_block = pre_norm_block
