"""A correct LayerNorm and RMSNorm, computed in float32 (float64 for float64 inputs), split
into hooks, plus a correct pre-norm ``residual_block``.

Every planted-bug target in this folder subclasses one of them, overrides ONE hook with a
real-world mistake, and exports it under the protocol name::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import LayerNorm as Base

    class LayerNorm(Base):
        def variance(self, h, mean, dims):
            return h.var(dim=dims, keepdim=True)      # BUG: torch.var is unbiased by default

Targets are loaded by file path, so they find this module by putting their own directory
on ``sys.path``. Unmodified, the classes pass every norm property
(tests/test_planted_norms.py checks this): constructed like torch.nn.LayerNorm /
torch.nn.RMSNorm, statistics over the trailing normalized_shape, eps=None for RMSNorm is
torch's finfo(compute dtype).eps, the output has the input's dtype.
"""
from __future__ import annotations

import torch
from torch import nn

HALF_DTYPES = (torch.float16, torch.bfloat16)


class _Norm(nn.Module):
    def __init__(self, normalized_shape, eps, elementwise_affine, bias):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(shape)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(shape)) if elementwise_affine and bias else None

    # -- hooks shared by both ---------------------------------------------------
    def compute_dtype(self, x):
        """float32 for half inputs (torch's opmath), the input dtype otherwise."""
        return torch.float32 if x.dtype in HALF_DTYPES else x.dtype

    def stat_dims(self, h):
        """The dims the statistics span: the trailing normalized_shape."""
        return tuple(range(h.dim() - len(self.normalized_shape), h.dim()))


class LayerNorm(_Norm):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias=True)

    def mean(self, h, dims):
        return h.mean(dim=dims, keepdim=True)

    def variance(self, h, mean, dims):
        return (h - mean).pow(2).mean(dim=dims, keepdim=True)

    def normalize(self, h, mean, var):
        return (h - mean) * torch.rsqrt(var + self.eps)

    def affine(self, y):
        if self.weight is not None:
            y = y * self.weight.to(y.dtype)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y

    def forward(self, x):
        h = x.to(self.compute_dtype(x))
        dims = self.stat_dims(h)
        mean = self.mean(h, dims)
        return self.affine(self.normalize(h, mean, self.variance(h, mean, dims))).to(x.dtype)


class RMSNorm(_Norm):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias=False)

    def default_eps(self, x, h):
        """eps=None: finfo of the compute dtype, as torch.nn.RMSNorm (torch >= 2.6)."""
        return torch.finfo(h.dtype).eps

    def mean_square(self, h, dims):
        return h.pow(2).mean(dim=dims, keepdim=True)

    def normalize(self, h, ms, eps):
        return h * torch.rsqrt(ms + eps)

    def scale(self, y):
        return y if self.weight is None else y * self.weight.to(y.dtype)

    def forward(self, x):
        h = x.to(self.compute_dtype(x))
        eps = self.default_eps(x, h) if self.eps is None else self.eps
        return self.scale(self.normalize(h, self.mean_square(h, self.stat_dims(h)), eps)).to(x.dtype)


class PreNormBlock(nn.Module):
    """x + sublayer(norm(x)); ``combine`` is the hook."""

    def __init__(self, dim, sublayer):
        super().__init__()
        self.norm = LayerNorm(dim)
        self.sublayer = sublayer

    def combine(self, x):
        return x + self.sublayer(self.norm(x))

    def forward(self, x):
        return self.combine(x)


def residual_block(dim, sublayer):
    return PreNormBlock(dim, sublayer)
