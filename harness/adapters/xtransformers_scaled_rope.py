"""x-transformers' rotary embedding as ``ScaledRotaryEmbedding``: its ``RotaryEmbedding`` (position
interpolation: the ``linear`` rule) and ``apply_rotary_pos_emb``, called as its ``Attention`` layers
call them.

    --impl harness.adapters.xtransformers_scaled_rope     (pip install x-transformers==2.31.10)

Its ``Attention`` builds ``RotaryEmbedding(rotary_emb_dim, base=..., interpolation_factor=...)`` with a
rotary dim that may be smaller than the head dim, gets ``freqs, scale = rotary(positions)`` and
rotates with ``apply_rotary_pos_emb(t, freqs, scale)``, which rotates the first ``freqs.shape[-1]``
dims and passes the rest through: the protocol's partial rotary factor, natively. Pairs are
interleaved (``rope_layout``). Its ``base_rescale_factor`` is a fixed NTK-aware base (no sequence
length: not the dynamic rule), and it has no yarn, llama3 or longrope: those raise
NotImplementedError at construction; its attention factor is 1 (``use_xpos`` off, as its models
default). The angles are float32 whatever x's dtype, so float64 is not declared.
"""
from __future__ import annotations

import torch
import x_transformers
from x_transformers.x_transformers import RotaryEmbedding as _XRotary  # (not the protocol's RotaryEmbedding)
from x_transformers.x_transformers import apply_rotary_pos_emb

__version__ = getattr(x_transformers, "__version__", "2.x")
HARNESS_CONVENTIONS = {"rope_layout": "interleaved"}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


class ScaledRotaryEmbedding(torch.nn.Module):
    """x-transformers' rotary embedding over int(dim * partial_rotary_factor) dims, and its apply."""

    def __init__(self, dim, base=10000.0, scaling=None):
        super().__init__()
        rule = (scaling or {}).get("rope_type", "default")
        if rule not in ("default", "linear"):
            raise NotImplementedError(f"x-transformers' RotaryEmbedding has no {rule!r} rule (interpolation only)")
        factor = float(scaling["factor"]) if rule == "linear" else 1.0
        rotary_dim = int(dim * float((scaling or {}).get("partial_rotary_factor", 1.0)))
        self.rotary = _XRotary(rotary_dim, base=base, interpolation_factor=factor)

    def forward(self, x, positions):
        freqs, scale = self.rotary(positions.to(x.device))
        return apply_rotary_pos_emb(x, freqs, scale)
