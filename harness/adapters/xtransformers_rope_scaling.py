"""x-transformers' ``RotaryEmbedding`` with its position interpolation (``interpolation_factor``) as
``rope_frequencies``: the ``linear`` rule, and plain RoPE without scaling.

    --impl harness.adapters.xtransformers_rope_scaling     (pip install x-transformers==2.31.10)

Its module, built as its ``Attention`` layers build it (``RotaryEmbedding(dim, base=...,
interpolation_factor=factor)``), returns the angles of positions t (``forward(t)``: t * inv_freq /
interpolation_factor, each pair's angle twice, interleaved); the adapter reads the angles at t = 1,
the frequencies. Its ``base_rescale_factor`` is a fixed NTK-aware base (no sequence length, so not
the dynamic rule) and it has no yarn, llama3 or longrope: those raise NotImplementedError; its
attention factor is 1 (``use_xpos`` off, as its models default).
"""
from __future__ import annotations

import torch
import x_transformers
from x_transformers.x_transformers import RotaryEmbedding as _XRotary  # (not the protocol's RotaryEmbedding)

__version__ = getattr(x_transformers, "__version__", "2.x")


def rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None):
    rule = (scaling or {}).get("rope_type", "default")
    if float((scaling or {}).get("partial_rotary_factor", 1.0)) != 1.0:
        raise NotImplementedError("x-transformers's module rotates the dim it is given (no partial_rotary_factor)")
    if rule not in ("default", "linear"):
        raise NotImplementedError(f"x-transformers' RotaryEmbedding has no {rule!r} rule (interpolation only)")
    factor = float(scaling["factor"]) if rule == "linear" else 1.0
    rope = _XRotary(dim, base=base, interpolation_factor=factor)
    freqs, _ = rope(torch.tensor([1]))
    return freqs[0, 0, ::2], 1.0
