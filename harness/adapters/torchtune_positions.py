"""torchtune's rotary position embedding under the harness protocol name.

    --impl harness.adapters.torchtune_positions     (pip install torchtune)

- ``apply_rotary_embedding``: ``torchtune.modules.RotaryPositionalEmbeddings``. It
  rotates pairs (2i, 2i + 1) (x.reshape(..., D/2, 2)): the interleaved layout, in
  float32, from a cos/sin cache of ``max_seq_len`` positions indexed with the given
  positions. The cache must cover every position (torchtune raises otherwise), so the
  adapter builds one that reaches the largest position asked for.

- ``RotaryEmbedding`` (the stateful form): one ``RotaryPositionalEmbeddings(dim,
  max_seq_len=4096, base)`` kept across calls, its cos/sin cache built at construction;
  ``forward(x, offset)`` indexes it with ``input_pos = offset + arange(L)``.

torchtune has no ALiBi or T5 bucket implementation.

torchtune 0.6's package ``__init__`` imports torchao; ``modules/position_embeddings.py`` is
read as ``harness.adapters.torchtune_files`` says. Raises ImportError when torchtune is not
installed.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import metadata

import torch

from harness.adapters.torchtune_files import load

RotaryPositionalEmbeddings, SOURCE = load("modules.position_embeddings", "RotaryPositionalEmbeddings", __name__)
__version__ = metadata.version("torchtune")

HARNESS_CONVENTIONS = {"rope_layout": "interleaved"}

#: RotaryPositionalEmbeddings computes angles and the rotation in float32 whatever x's dtype
#: (the result is cast to it), so a float64 input gets float32-accurate angles: float64 is not declared.
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


@lru_cache(maxsize=4)
def _rope(dim: int, base: float, max_seq_len: int) -> RotaryPositionalEmbeddings:
    return RotaryPositionalEmbeddings(dim, max_seq_len=max_seq_len, base=base)


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, H, L, D) -> torchtune's [b, s, n_h, h_d]; positions (L,) or (B, L) as input_pos."""
    need = int(positions.max()) + 1 if positions.numel() else 1
    size = max(4096, 1 << (need - 1).bit_length())  # the cache reaches the largest position
    rope = _rope(x.shape[-1], float(base), size).to(x.device)
    out = rope(x.transpose(1, 2), input_pos=positions)  # differentiable in x; the cache is a buffer
    return out.transpose(1, 2)


class RotaryEmbedding(torch.nn.Module):
    """x (B, H, L, D) at positions offset .. offset + L - 1, from one kept cache."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.inner = RotaryPositionalEmbeddings(dim, max_seq_len=4096, base=base)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device) + int(offset)
        with torch.no_grad():
            return self.inner(x.transpose(1, 2), input_pos=positions).transpose(1, 2)
