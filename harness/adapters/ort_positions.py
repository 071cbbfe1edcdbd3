"""onnxruntime's ``RotaryEmbedding`` contrib operator (``com.microsoft``; onnxruntime 1.32, its CPU
kernel) as ``apply_rotary_embedding`` and the stateful ``RotaryEmbedding``.

    --impl harness.adapters.ort_positions     (pip install onnxruntime==1.32.0)

The operator is the rotary embedding of the models onnxruntime's transformer optimizer and
onnxruntime-genai export: one node per query and key over a (B, H, L, D) input, rotating it by
``cos_cache`` / ``sin_cache`` (max positions, D/2) rows gathered at ``position_ids``. Two ways a
model feeds positions, both used here: a (B, L) tensor of position ids (``apply_rotary_embedding``)
and a one-element offset, the first position of a contiguous run (``RotaryEmbedding``, as a model
decodes at its cache's length). What is onnxruntime's: the gather, the pairing (``interleaved=0``,
rotate-half) and the rotation in x's dtype. What the adapter does: the tables, as an exporter bakes
them into the model (angles ``pos * base^(-2i/D)`` in float64, cos and sin then cast to x's dtype,
the op requiring the cache in x's dtype); the module's table grows (doubling) when a call reaches
past it, as a model with a larger ``max_position_embeddings`` would have held it.

Declared: float64 and bfloat16 (no CPU kernel here; NumPy has no bfloat16), backward and autocast.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto
from torch import nn

from harness.adapters.ort_graph import ELEM, np_of, session, to_torch

__version__ = ort.__version__
HARNESS_DTYPES = ("float32", "float16")
HARNESS_UNSUPPORTED = {"backward", "autocast"}
HARNESS_CONVENTIONS = {"rope_layout": "rotate_half"}


def tables(dim: int, base: float, positions: int, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos_cache, sin_cache (positions, dim/2) in ``dtype``, as an exporter writes them."""
    theta = float(base) ** (-2.0 * torch.arange(dim // 2, dtype=torch.float64) / dim)
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * theta
    return np_of(angles.cos().to(dtype)), np_of(angles.sin().to(dtype))


def rotate(x: torch.Tensor, position_ids: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> torch.Tensor:
    """One ``RotaryEmbedding`` node: x (B, H, L, D), position_ids (B, L) or (1,) int64."""
    if x.dtype not in (torch.float32, torch.float16):
        raise NotImplementedError(f"RotaryEmbedding has no CPU kernel here for {x.dtype} (HARNESS_DTYPES)")
    elem = ELEM[x.dtype]
    run = session("RotaryEmbedding", "com.microsoft",
                  (("input", elem), ("position_ids", TensorProto.INT64), ("cos_cache", elem), ("sin_cache", elem)),
                  (("output", elem),), (("interleaved", 0),), 21)
    (out,) = run.run(None, {"input": np_of(x), "position_ids": position_ids, "cos_cache": cos, "sin_cache": sin})
    return to_torch(out, x)


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, H, L, D) at positions (L,) or (B, L): out like x."""
    if positions.numel() and int(positions.min()) < 0:
        raise NotImplementedError("RotaryEmbedding gathers its tables at non-negative position ids")
    B, L = x.shape[0], x.shape[-2]
    ids = positions.to(torch.int64).cpu().reshape(-1, L).expand(B, L)
    # the op wants at least L rows (a model's table has max_position_embeddings >= any sequence)
    cos, sin = tables(x.shape[-1], base, max(int(ids.max()) + 1 if ids.numel() else 1, L), x.dtype)
    return rotate(x, np_of(ids), cos, sin)


class RotaryEmbedding(nn.Module):
    """The stateful form: tables held across calls (per dtype), positions given as the offset."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.dim, self.base, self._tables = dim, float(base), {}

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        need = int(offset) + x.shape[-2]
        held = self._tables.get(x.dtype)
        if held is None or held[0].shape[0] < need:
            size = max(need, 2 * (0 if held is None else held[0].shape[0]), 16)
            held = self._tables[x.dtype] = tables(self.dim, self.base, size, x.dtype)
        return rotate(x, np.asarray([int(offset)], np.int64), *held)
