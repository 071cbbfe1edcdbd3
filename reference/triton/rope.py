"""Rotary position embedding in Triton, both pairings (``rope_layout``).

    x (B, H, L, D), D even;  positions (L,) or (B, L), integers;  output (B, H, L, D), x's dtype
    theta_i = base^(-2i/D);  pair i at position m is rotated by m * theta_i:
        (a, b) -> (a cos - b sin,  a sin + b cos)
    interleaved:  pairs (2i, 2i + 1)   (GPT-J, Meta llama)
    rotate_half:  pairs (i, i + D/2)   (GPT-NeoX, Hugging Face Llama)

As RoPE kernels take them (FlashAttention's, liger's), the cos/sin tables (B or 1, L, D/2) are
built outside the kernel, here in float64 from the positions and rounded to float32 once (kept
in float64 for float64 inputs). The kernel rotates a (BLOCK_L, D/2) tile of pairs of one
(batch, head) per program, in float32 (float64 for float64 inputs).
This module's ``apply_rotary_embedding`` uses rotate-half pairs; ``rope_interleaved`` (the
other module) the interleaved ones. The backward is the rotation by -angle (the same kernel).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

HARNESS_TILES = (64,)
HARNESS_CONVENTIONS = {"rope_layout": "rotate_half"}
BLOCK_L = 64


@triton.jit
def _rope(X, COS, SIN, Y, H, L, D, sxb, sxh, sxl, stab, sign,
          HALF: tl.constexpr, INTERLEAVED: tl.constexpr, BLOCK_L: tl.constexpr, ACC: tl.constexpr):
    """One (BLOCK_L, D/2) tile of pairs of x[b, h]; ``sign`` = -1 rotates backwards (the
    gradient); ``stab`` is 0 when one table serves every batch row. Y is contiguous."""
    start = tl.program_id(0) * BLOCK_L
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    rows = start + tl.arange(0, BLOCK_L)
    i = tl.arange(0, HALF)
    inside = (rows[:, None] < L) & (i[None, :] < D // 2)
    if INTERLEAVED:
        first, second = 2 * i, 2 * i + 1
    else:
        first, second = i, i + D // 2
    x_at = X + b * sxb + h * sxh + rows[:, None] * sxl
    a = tl.load(x_at + first[None, :], mask=inside, other=0.0).to(ACC)
    c = tl.load(x_at + second[None, :], mask=inside, other=0.0).to(ACC)
    t_at = b * stab + rows[:, None] * (D // 2) + i[None, :]
    cos = tl.load(COS + t_at, mask=inside, other=1.0).to(ACC)
    sin = tl.load(SIN + t_at, mask=inside, other=0.0).to(ACC) * sign
    y_at = Y + ((b * H + h) * L + rows[:, None]) * D
    tl.store(y_at + first[None, :], (a * cos - c * sin).to(Y.dtype.element_ty), mask=inside)
    tl.store(y_at + second[None, :], (a * sin + c * cos).to(Y.dtype.element_ty), mask=inside)


def rope_tables(positions: torch.Tensor, dim: int, base: float, device, dtype=torch.float32):
    """cos, sin (P, L, D/2) in ``dtype`` (float32; float64 for float64 inputs) for positions (L,)
    (P = 1) or (B, L) (P = B): float64 angles."""
    theta = float(base) ** (-2.0 * torch.arange(dim // 2, dtype=torch.float64) / dim)
    pos = positions.to(torch.float64).cpu()
    angles = (pos.reshape(-1, pos.shape[-1])[..., None] * theta)
    return (angles.cos().to(dtype).contiguous().to(device), angles.sin().to(dtype).contiguous().to(device))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, sign: float = 1.0):
    """x (B, H, L, D) rotated pairwise by the tables (P, L, D/2); a new contiguous tensor."""
    B, H, L, D = x.shape
    y = torch.empty((B, H, L, D), dtype=x.dtype, device=x.device)
    if y.numel():
        xs = x.stride()
        if xs[-1] != 1:
            x = x.contiguous()
            xs = x.stride()
        stab = 0 if cos.shape[0] == 1 else cos.stride(0)
        _rope[(triton.cdiv(L, BLOCK_L), B * H)](x, cos, sin, y, H, L, D, xs[0], xs[1], xs[2], stab, sign,
                                                HALF=triton.next_power_of_2(max(D // 2, 1)),
                                                INTERLEAVED=interleaved, BLOCK_L=BLOCK_L,
                                                ACC=tl.float64 if x.dtype == torch.float64 else tl.float32)
    return y


class _Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin, interleaved):
        ctx.save_for_backward(cos, sin)
        ctx.interleaved = interleaved
        return rotate(x, cos, sin, interleaved)

    @staticmethod
    def backward(ctx, dy):
        cos, sin = ctx.saved_tensors
        return rotate(dy, cos, sin, ctx.interleaved, sign=-1.0), None, None, None


def rope(x, positions, base=10000.0, interleaved=False):
    """RoPE of x (B, H, L, D) at positions (L,) or (B, L)."""
    if x.shape[-1] % 2:
        raise ValueError(f"RoPE needs an even head dim, got {x.shape[-1]}")
    table = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = rope_tables(positions, x.shape[-1], base, x.device, table)
    return _Rope.apply(x, cos, sin, interleaved)


def apply_rotary_embedding(x, positions, base=10000.0):
    """The protocol function, rotate-half pairs (i, i + D/2)."""
    return rope(x, positions, base, interleaved=False)


class RotaryEmbedding(nn.Module):
    """The stateful form: ``forward(x, offset)`` rotates at positions offset .. offset + L - 1."""

    interleaved = False

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, x, offset=0):
        positions = torch.arange(offset, offset + x.shape[-2], device=x.device)
        return rope(x, positions, self.base, interleaved=self.interleaved)
