"""Rotary position embedding (RoFormer, Su et al. 2021), computed in float64.

    x (B, H, L, D), D even;  positions (L,) or (B, L), integers
    theta_i = base^(-2i/D),  i = 0 .. D/2 - 1
    pair i of every vector at position m is rotated by the angle m * theta_i:
        (a, b) -> (a cos(m theta_i) - b sin(m theta_i),  a sin(m theta_i) + b cos(m theta_i))
    output (B, H, L, D), in x's dtype

so <R(m) q, R(n) k> depends only on m - n. Which two dims form pair i is the
layout, a named convention (``rope_layout``):
    interleaved  (GPT-J, Meta llama, the RoFormer paper):  (2i, 2i + 1)
    rotate_half  (GPT-NeoX, Hugging Face Llama):          (i, i + D/2)
The protocol function below uses the paper's interleaved pairs.

The stateful form ``RotaryEmbedding(dim, base)`` (called repeatedly, ``forward(x, offset)``:
positions offset .. offset + L - 1) keeps no cache here: each call is the function above.
"""
from __future__ import annotations

import torch
from torch import nn

LAYOUTS = ("interleaved", "rotate_half")


def rope_frequencies(dim: int, base: float = 10000.0, dtype=torch.float64) -> torch.Tensor:
    """theta_i = base^(-2i/dim) for i = 0 .. dim/2 - 1, shape (dim/2,).

    In float64 this is the formula; in float32 it is the recipe every library
    uses (1 / base^(arange(0, dim, 2) / dim) in float32), the policy's naive yardstick.
    """
    if dtype == torch.float64:
        return float(base) ** (-2.0 * torch.arange(dim // 2, dtype=torch.float64) / dim)
    return 1.0 / (float(base) ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype)[: dim // 2] / dim))


def pair_indices(dim: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, second): the two dims of pair i, each shape (dim/2,)."""
    i = torch.arange(dim // 2)
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    if layout == "rotate_half":
        return i, i + dim // 2
    raise ValueError(f"unknown rope layout {layout!r}; known: {LAYOUTS}")


def rope_angles(positions: torch.Tensor, dim: int, base: float = 10000.0,
                dtype=torch.float64) -> torch.Tensor:
    """m * theta_i: (L, D/2) for positions (L,), (B, 1, L, D/2) for positions (B, L)."""
    theta = rope_frequencies(dim, base, dtype).to(positions.device)
    angles = positions.to(dtype)[..., None] * theta  # (..., L, D/2)
    return angles[:, None] if positions.dim() == 2 else angles


def rope_math(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0,
              layout: str = "interleaved", compute_dtype=torch.float64,
              angle_dtype=None) -> torch.Tensor:
    """The rotation in ``compute_dtype`` with angles computed in ``angle_dtype``
    (default: compute_dtype); returns a tensor of compute_dtype.

    Used as the truth (everything float64) and as the tolerance policy's naive
    yardstick (angles in float32 as every library computes them, cos/sin rounded
    to the input dtype, the rotation in the input dtype).
    """
    D = x.shape[-1]
    if D % 2:
        raise ValueError(f"RoPE needs an even head dim, got {D}")
    angle_dtype = compute_dtype if angle_dtype is None else angle_dtype
    return rotate(x, rope_angles(positions, D, base, angle_dtype), layout=layout, compute_dtype=compute_dtype)


def rotate(x: torch.Tensor, angles: torch.Tensor, factor: float = 1.0, layout: str = "interleaved",
           compute_dtype=torch.float64) -> torch.Tensor:
    """``x`` (..., L, D) with its first R = 2 * angles.shape[-1] dims rotated pairwise by ``angles``
    ((L, R/2), or broadcastable to x's (..., L, R/2)) and multiplied by ``factor`` (cos and sin rounded to
    ``compute_dtype`` first, as libraries round their tables), the rest passed through; returns
    ``compute_dtype``."""
    R = 2 * angles.shape[-1]
    cos = (angles.cos() * factor).to(compute_dtype)
    sin = (angles.sin() * factor).to(compute_dtype)
    first, second = pair_indices(R, layout)
    xc = x.to(compute_dtype)
    a, b = xc[..., first], xc[..., second]
    out = xc.clone()
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """The protocol function: float64 math (interleaved pairs), cast back to x's dtype."""
    return rope_math(x, positions, base).to(x.dtype)


class RotaryEmbedding(nn.Module):
    """The protocol's stateful rotary module: forward(x (B, H, L, D), offset=0) rotates x at
    positions offset .. offset + L - 1 (no cache: every call is apply_rotary_embedding)."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.dim, self.base = int(dim), float(base)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"x has head dim {x.shape[-1]}, the module was built for {self.dim}")
        positions = torch.arange(x.shape[-2], device=x.device) + int(offset)
        return apply_rotary_embedding(x, positions, self.base)
