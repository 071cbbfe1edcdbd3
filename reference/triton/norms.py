"""RMSNorm and LayerNorm in Triton, forward and backward: one program per block of tokens (rows).

    RMSNorm(x)   = x * rstd * w,                 rstd = 1 / sqrt(mean(x^2) + eps)
    LayerNorm(x) = (x - mean) * rstd * w + b,    rstd = 1 / sqrt(var(x) + eps)

Shapes: x (*lead, *normalized_shape) is seen as M rows of N = prod(normalized_shape) features;
weight, bias (*normalized_shape); out like x, in x's dtype. A program loads whole rows, a
(BLOCK_M, BLOCK_N) tile (BLOCK_N = next power of two >= N, masked; BLOCK_M rows, about 4096
elements), with the statistics in float32 (float64 inputs: float64). rstd (and LayerNorm's mean) are kept per row for the backward:

    xhat = x * rstd (RMSNorm) or (x - mean) * rstd,   g = dy * w
    dx   = rstd * (g - xhat * mean(g * xhat))                 (RMSNorm)
    dx   = rstd * (g - mean(g) - xhat * mean(g * xhat))       (LayerNorm)
    dw   = sum over rows of dy * xhat,   db = sum over rows of dy

The per-row dy * xhat are written by the kernel and summed over rows by torch.
``eps=None`` (RMSNorm) is torch.nn.RMSNorm's: finfo of float32 for half inputs, else of x's dtype.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _norm_fwd(X, W, B, Y, MEAN, RSTD, M, N, EPS, CENTER: tl.constexpr, AFFINE: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    eps = tl.load(EPS)  # float64 for float64 inputs: a float argument would be rounded to fp32
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = rows[:, None] * N + cols[None, :]
    x = tl.load(X + at, mask=inside, other=0.0).to(ACC)
    mean = tl.zeros([BLOCK_M], ACC)
    if CENTER:
        mean = tl.sum(x, 1) / N
        x = tl.where(inside, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, 1) / N + eps)
    y = x * rstd[:, None]
    if AFFINE:
        y = y * tl.load(W + cols, mask=cols < N, other=0.0).to(ACC)[None, :]
        if CENTER:
            y = y + tl.load(B + cols, mask=cols < N, other=0.0).to(ACC)[None, :]
    tl.store(Y + at, y.to(Y.dtype.element_ty), mask=inside)
    tl.store(MEAN + rows, mean, mask=rows < M)
    tl.store(RSTD + rows, rstd, mask=rows < M)


@triton.jit
def _norm_bwd(X, W, DY, DX, DWROW, MEAN, RSTD, M, N, CENTER: tl.constexpr, AFFINE: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    inside = (rows[:, None] < M) & (cols[None, :] < N)
    at = rows[:, None] * N + cols[None, :]
    x = tl.load(X + at, mask=inside, other=0.0).to(ACC)
    dy = tl.load(DY + at, mask=inside, other=0.0).to(ACC)
    mean = tl.load(MEAN + rows, mask=rows < M, other=0.0)
    rstd = tl.load(RSTD + rows, mask=rows < M, other=0.0)
    xhat = tl.where(inside, (x - mean[:, None]) * rstd[:, None], 0.0)
    g = dy
    if AFFINE:
        g = dy * tl.load(W + cols, mask=cols < N, other=0.0).to(ACC)[None, :]
        tl.store(DWROW + at, dy * xhat, mask=inside)
    inner = g - xhat * (tl.sum(g * xhat, 1) / N)[:, None]
    if CENTER:
        inner = inner - (tl.sum(g, 1) / N)[:, None]
    tl.store(DX + at, (rstd[:, None] * inner).to(DX.dtype.element_ty), mask=inside)


def rows_per_program(N: int) -> int:
    """Rows one program normalizes: a tile of about 4096 elements (one row when N >= 4096)."""
    return max(1, min(64, 4096 // triton.next_power_of_2(N)))


class _NormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, N, eps, center):
        x2 = x.reshape(-1, N).contiguous()
        M = x2.shape[0]
        acc_t = torch.float64 if x.dtype == torch.float64 else torch.float32
        meta = dict(CENTER=center, AFFINE=weight is not None, BLOCK_N=triton.next_power_of_2(N),
                    BLOCK_M=rows_per_program(N),
                    ACC=tl.float64 if acc_t == torch.float64 else tl.float32)
        y = torch.empty_like(x2)
        mean = torch.empty(M, dtype=acc_t, device=x.device)
        rstd = torch.empty(M, dtype=acc_t, device=x.device)
        w = weight.contiguous() if weight is not None else x2  # (not read without AFFINE)
        b = bias.contiguous() if bias is not None else w
        if M:
            _norm_fwd[(triton.cdiv(M, meta["BLOCK_M"]),)](x2, w, b, y, mean, rstd, M, N,
                                                          torch.tensor([eps], dtype=acc_t, device=x.device), **meta)
        ctx.save_for_backward(x2, w, mean, rstd)
        ctx.meta, ctx.N, ctx.shape = meta, N, x.shape
        ctx.has = (weight is not None, bias is not None)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        N = ctx.N
        dy2 = dy.reshape(-1, N).contiguous()
        dx = torch.empty_like(x2)
        dwrow = torch.zeros(x2.shape, dtype=mean.dtype, device=x2.device)
        if x2.shape[0]:
            M = x2.shape[0]
            _norm_bwd[(triton.cdiv(M, ctx.meta["BLOCK_M"]),)](x2, w, dy2, dx, dwrow, mean, rstd, M, N, **ctx.meta)
        has_w, has_b = ctx.has
        dw = dwrow.sum(0).reshape(w.shape).to(w.dtype) if has_w else None
        db = dy2.to(mean.dtype).sum(0).reshape(w.shape).to(w.dtype) if has_b else None
        return dx.reshape(ctx.shape), dw, db, None, None, None


def _shape(normalized_shape) -> tuple[int, ...]:
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


class LayerNorm(nn.Module):
    """torch.nn.LayerNorm's interface; weight ones, bias zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape))
            self.bias = nn.Parameter(torch.zeros(self.normalized_shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return _NormFunction.apply(x, self.weight, self.bias, math.prod(self.normalized_shape), float(self.eps), True)


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm's interface; weight ones; eps=None as torch.nn.RMSNorm."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        eps = self.eps
        if eps is None:
            eps = torch.finfo(torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype).eps
        return _NormFunction.apply(x, self.weight, None, math.prod(self.normalized_shape), float(eps), False)
