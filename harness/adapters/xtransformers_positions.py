"""lucidrains' x-transformers position encodings under the harness protocol names.

    --impl harness.adapters.xtransformers_positions     (pip install x-transformers)

- ``apply_rotary_embedding``: ``RotaryEmbedding`` + ``apply_rotary_pos_emb``; its
  ``rotate_half`` pairs (2i, 2i + 1), with freqs duplicated as [f0, f0, f1, f1, ...]:
  the interleaved layout. Angles in float32 (autocast disabled).
- ``alibi_slopes`` / ``alibi_bias``: ``AlibiPositionalBias`` (the paper's _get_slopes;
  bias -slope * |i - j| with queries at positions Lk - Lq .. Lk - 1, i.e. aligned to the end).
- ``t5_relative_position_bucket``: ``RelativePositionBias._relative_position_bucket``,
  whose flag is ``causal`` (= not bidirectional).
- ``AlibiPositionalBias`` / ``T5RelativePositionBias`` (the cached module forms): its
  ``AlibiPositionalBias`` (a cached bias buffer) and ``RelativePositionBias`` (scale 1), called
  ``forward(query_len, key_len)``.
- ``sinusoidal_position_embedding``: ``ScaledSinusoidalEmbedding`` with its learned scale
  (initialised to dim^-0.5) set to 1: [sin ..., cos ...], the concatenated layout.
- ``LearnedPositionEmbedding``: ``AbsolutePositionalEmbedding`` (an nn.Embedding) with its
  fixed dim^-0.5 output scale set to 1, so the lookup is the table; ``weight`` is that table.

Raises ImportError at import when x-transformers is not installed.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import metadata

import torch
from torch import nn

try:
    # (private names: a library class under a protocol name would be taken as that name)
    from x_transformers.x_transformers import AbsolutePositionalEmbedding
    from x_transformers.x_transformers import AlibiPositionalBias as _Alibi
    from x_transformers.x_transformers import RelativePositionBias as _RelativeBias
    from x_transformers.x_transformers import RotaryEmbedding as _Rotary
    from x_transformers.x_transformers import ScaledSinusoidalEmbedding, apply_rotary_pos_emb
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("harness.adapters.xtransformers_positions needs x-transformers "
                      f"(pip install x-transformers): {exc}") from exc

__version__ = metadata.version("x-transformers")

HARNESS_CONVENTIONS = {"rope_layout": "interleaved", "sinusoidal_layout": "concatenated"}

#: RotaryEmbedding computes the angles in float32 whatever x's dtype (cos/sin are then
#: cast to it), so a float64 input gets float32-accurate angles: float64 is not declared.
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


@lru_cache(maxsize=16)
def _rotary(dim: int, base: float) -> _Rotary:
    return _Rotary(dim, base=base)


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, H, L, D), positions (L,) or (B, L)."""
    rotary = _rotary(x.shape[-1], float(base)).to(x.device)
    with torch.no_grad():  # the angles carry no gradient; the rotation of x does
        freqs, scale = rotary(positions)  # (1 or B, L, D)
    return apply_rotary_pos_emb(x, freqs, scale)


def alibi_slopes(num_heads: int) -> torch.Tensor:
    return torch.tensor(_Alibi._get_slopes(num_heads))


def alibi_bias(num_heads: int, query_len: int, key_len: int) -> torch.Tensor:
    """(H, Lq, Lk)."""
    return _Alibi(heads=num_heads)(query_len, key_len)


def t5_relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True,
                                num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    return _RelativeBias._relative_position_bucket(relative_position, causal=not bidirectional,
                                                          num_buckets=num_buckets, max_distance=max_distance)


def sinusoidal_position_embedding(num_positions: int, dim: int) -> torch.Tensor:
    emb = ScaledSinusoidalEmbedding(dim)
    with torch.no_grad():
        emb.scale.fill_(1.0)
        return emb(torch.empty(1, num_positions))  # x only supplies the length


class LearnedPositionEmbedding(nn.Module):
    def __init__(self, max_positions: int, dim: int):
        super().__init__()
        self.inner = AbsolutePositionalEmbedding(dim, max_positions)
        self.inner.scale = 1.0

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.emb.weight

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        # x only supplies the sequence length (checked against max_seq_len) and the device;
        # with explicit positions an empty one passes that check and the table does the rest
        return self.inner(positions.new_empty(1, 0), pos=positions)


class AlibiPositionalBias(_Alibi):
    """The protocol's ``AlibiPositionalBias(num_heads)``: x-transformers' own module, which keeps
    the bias of its largest call as a buffer and slices ``[..., -i:, -j:]`` for smaller ones;
    ``forward(query_len, key_len)`` is its ``forward(i, j)``."""

    def __init__(self, num_heads: int):
        super().__init__(num_heads, total_heads=num_heads)


class T5RelativePositionBias(_RelativeBias):
    """The protocol's ``T5RelativePositionBias``: x-transformers' ``RelativePositionBias`` with
    ``scale=1`` and ``causal = not bidirectional``; ``forward(i, j)`` puts the queries at j - i .. j - 1."""

    def __init__(self, num_heads: int, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__(scale=1, causal=not bidirectional, num_buckets=num_buckets, max_distance=max_distance,
                         heads=num_heads)


class RotaryEmbedding(nn.Module):
    """The protocol's stateful ``RotaryEmbedding(dim, base)``: x-transformers' ``RotaryEmbedding``
    (built once, kept) at positions offset .. offset + L - 1, then ``apply_rotary_pos_emb``."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.rotary = _Rotary(dim, base=base)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device) + int(offset)
        with torch.no_grad():
            freqs, scale = self.rotary(positions)
        return apply_rotary_pos_emb(x, freqs, scale)
