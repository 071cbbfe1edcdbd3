"""liger-kernel's Triton RoPE called the way Hugging Face's Llama calls it: q and its gradient in the
physical layout liger assumes.

    --impl harness.adapters.liger_positions_hf_layout   (pip install --no-deps liger-kernel==0.8.5 triton==3.9.0)

``harness.adapters.liger_positions`` hands liger a q in any layout, and liger 0.8.5 rotates a
contiguous (B, H, 1, D) q wrong: its row stride is read from the size-1 L dim of
``q.transpose(1, 2)`` (that module's doc; ``tests/test_planted_triton.py``). Its comment says what
it assumes: q is a transposed view of a contiguous (B, L, H, D) tensor (the projection's output in
Hugging Face's attention), so that the transpose back is contiguous and its row stride H * D. This
adapter keeps that: x is copied into a (B, L, H, D) buffer and handed over as its (B, H, L, D)
view, and the incoming gradient likewise (liger's backward indexes the same way). What it tests is
liger's kernel as its real caller uses it; the other adapter is the bug.
Tables, pairing (``rope_layout = rotate_half``) and float64 (unsupported): as ``liger_positions``.
"""
from __future__ import annotations

import torch
from liger_kernel.ops.rope import LigerRopeFunction

from harness.adapters.liger_positions import _tables

HARNESS_CONVENTIONS = {"rope_layout": "rotate_half"}
HARNESS_UNSUPPORTED = {"float64"}  # the kernel computes in the tensors' dtype with float32 tables


def _hf_view(t: torch.Tensor) -> torch.Tensor:
    """A fresh copy of t (B, H, L, D), as the (B, H, L, D) view of a contiguous (B, L, H, D) buffer."""
    b, h, length, d = t.shape
    buffer = torch.empty((b, length, h, d), dtype=t.dtype, device=t.device)
    return buffer.copy_(t.transpose(1, 2)).transpose(1, 2)


class _GradientInHFLayout(torch.autograd.Function):
    """Identity whose backward hands the gradient on as ``_hf_view`` (a fresh buffer, which liger's
    backward may rotate in place)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return _hf_view(grad)


def apply_rotary_embedding(x, positions, base=10000.0):
    """x (B, H, L, D) at positions (L,) or (B, L), through liger's kernel in Hugging Face's layout."""
    cos, sin = _tables(positions, x.shape[-1], base, x.device)
    k = _hf_view(x[:, :1].detach())  # liger rotates q and k together; one head of k is enough
    q_out, _ = LigerRopeFunction.apply(_hf_view(x), k, cos, sin)  # a fresh buffer: it may rotate in place
    return _GradientInHFLayout.apply(q_out)
