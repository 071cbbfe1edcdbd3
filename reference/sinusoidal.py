"""Sinusoidal position embedding (Vaswani et al. 2017), computed in float64.

    PE(m, 2i)     = sin(m w_i)
    PE(m, 2i + 1) = cos(m w_i),      w_i = 10000^(-2i/d),  i = 0 .. d/2 - 1
    output (num_positions, d), rows m = 0 .. num_positions - 1

so <PE_m, PE_n> = sum_i cos(w_i (m - n)): a function of m - n only. The
column order is a named convention (``sinusoidal_layout``):
    interleaved  (the paper):               [sin w_0, cos w_0, sin w_1, cos w_1, ...]
    concatenated (tensor2tensor, fairseq):  [sin w_0, ..., sin w_{d/2-1}, cos w_0, ..., cos w_{d/2-1}]
"""
from __future__ import annotations

import torch

LAYOUTS = ("interleaved", "concatenated")


def sinusoidal_frequencies(dim: int, base: float = 10000.0, dtype=torch.float64) -> torch.Tensor:
    """w_i = base^(-2i/dim), shape (ceil(dim/2),)."""
    return float(base) ** (-2.0 * torch.arange((dim + 1) // 2, dtype=dtype) / dim)


def sin_cos_columns(dim: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(sin_cols, cos_cols): the column of sin(m w_i) and of cos(m w_i), each (d/2,)."""
    i = torch.arange(dim // 2)
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    if layout == "concatenated":
        return i, i + dim // 2
    raise ValueError(f"unknown sinusoidal layout {layout!r}; known: {LAYOUTS}")


def sinusoidal_math(num_positions: int, dim: int, layout: str = "interleaved",
                    compute_dtype=torch.float64, start: int = 0) -> torch.Tensor:
    """Rows m = start .. start + num_positions - 1 in ``compute_dtype`` (the truth in
    float64, the policy's naive yardstick in the output dtype). Odd d (interleaved
    only): the last column is sin(m w_{(d-1)/2})."""
    if layout == "concatenated" and dim % 2:
        raise ValueError(f"the concatenated layout needs an even dim, got {dim}")
    m = torch.arange(start, start + num_positions, dtype=compute_dtype)
    w = sinusoidal_frequencies(dim, dtype=compute_dtype)
    ang = m[:, None] * w[None, :]  # (N, ceil(d/2))
    pe = torch.zeros(num_positions, dim, dtype=compute_dtype)
    if layout == "interleaved":
        pe[:, 0::2] = ang.sin()
        pe[:, 1::2] = ang[:, : dim // 2].cos()
    else:
        pe[:, : dim // 2], pe[:, dim // 2:] = ang.sin(), ang.cos()
    return pe


def sinusoidal_position_embedding(num_positions: int, dim: int) -> torch.Tensor:
    """The protocol function: float64 math, returned in the default dtype (float32)."""
    return sinusoidal_math(num_positions, dim).to(torch.get_default_dtype())
