"""lucidrains' rotary-embedding-torch as the protocol's stateful ``RotaryEmbedding``.

    --impl harness.adapters.rotary_embedding_torch     (pip install rotary-embedding-torch; it needs einops)

- ``RotaryEmbedding(dim, base)``: an nn.Module around ``rotary_embedding_torch.RotaryEmbedding(dim,
  theta=base)``, built once and kept, so the library's cache lives across calls (0.2.x: a dict of
  frequency tables under ``cache_key``; 0.8.x: the ``cached_freqs`` buffer);
  ``forward(x, offset)`` is ``rotate_queries_or_keys(x, offset=offset)``, x (B, H, L, D) with the
  sequence at dim -2. Its ``rotate_half`` pairs (2i, 2i + 1) with frequencies repeated
  [f0, f0, f1, f1, ...]: the interleaved layout.

Dtypes: the frequencies are float32 whatever x's dtype, so float64 is not declared. Before 0.8
(checked: 0.2.6, 0.2.7) ``apply_rotary_emb`` casts the angles to x's dtype before cos/sin
(``freqs.to(t)``): a half-precision x gets half-precision angles, the bug rope.long_context names,
so only float32 is declared there; 0.8.x (checked: 0.8.2, 0.8.3) rotates in float32 and casts the
result, and declares float32, float16 and bfloat16. Every release builds the positions
``arange(L) + offset`` in x's dtype, exact below 256 in bfloat16, where the stateful suite stays.

Raises ImportError at import when rotary-embedding-torch (or einops) is not installed.
"""
from __future__ import annotations

from importlib import metadata

import torch
from torch import nn

try:
    import rotary_embedding_torch as _ret
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("harness.adapters.rotary_embedding_torch needs rotary-embedding-torch "
                      f"(pip install rotary-embedding-torch einops): {exc}") from exc

__version__ = metadata.version("rotary-embedding-torch")
_RELEASE = tuple(int(p) for p in __version__.split(".")[:2])

HARNESS_CONVENTIONS = {"rope_layout": "interleaved"}
HARNESS_DTYPES = ("float32",) if _RELEASE < (0, 8) else ("float32", "float16", "bfloat16")


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.inner = _ret.RotaryEmbedding(dim, theta=base)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        with torch.no_grad():
            return self.inner.rotate_queries_or_keys(x, offset=offset)
