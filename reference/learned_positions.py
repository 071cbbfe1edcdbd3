"""Learned absolute position embedding: a trained table, one row per position.

    weight (max_positions, dim)          (an nn.Parameter, the table)
    forward(positions (...) integer) -> weight[positions]  (..., dim)

Positions outside [0, max_positions) have no embedding: they raise IndexError,
never clamp to the last row or wrap around (a model trained on 512 positions
has nothing to say about position 600).
"""
from __future__ import annotations

import torch
from torch import nn


class LearnedPositionEmbedding(nn.Module):
    def __init__(self, max_positions: int, dim: int):
        super().__init__()
        self.max_positions, self.dim = int(max_positions), int(dim)
        self.weight = nn.Parameter(torch.randn(self.max_positions, self.dim) * 0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        if positions.dtype.is_floating_point or positions.dtype == torch.bool:
            raise TypeError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= self.max_positions):
            bad = positions[(positions < 0) | (positions >= self.max_positions)][0]
            raise IndexError(f"position {int(bad)} is outside the table [0, {self.max_positions})")
        return self.weight[positions]
