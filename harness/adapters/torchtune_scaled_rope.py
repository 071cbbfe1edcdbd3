"""torchtune's rotary modules as ``ScaledRotaryEmbedding``: ``Llama3ScaledRoPE`` (``torchtune.models.llama3_1``)
for the ``llama3`` rule and ``RotaryPositionalEmbeddings`` for plain RoPE, called as torchtune's
attention layers call them.

    --impl harness.adapters.torchtune_scaled_rope     (pip install --no-deps torchtune==0.6.1)

Built as the Llama 3.1 builders build them (``Llama3ScaledRoPE(dim, max_seq_len, base, scale_factor,
low_freq_factor, high_freq_factor, old_context_len)``), with a cache of ``MAX_POSITIONS`` positions;
``forward(x [b, s, n_h, h_d], input_pos=[b, s])`` rotates interleaved pairs (``rope_layout``
interleaved), so the adapter transposes the protocol's (B, H, L, D) to torchtune's layout and back.
torchtune has no other scaling rule and no partial rotary dim: those raise NotImplementedError at
construction (unsupported); its attention factor is 1. Its cache is float32 (no float64 claim).
"""
from __future__ import annotations

import torch

from harness.adapters.torchtune_files import load

Llama3ScaledRoPE, _SOURCE = load("models.llama3_1._position_embeddings", "Llama3ScaledRoPE",
                                 "harness.adapters.torchtune_scaled_rope")
RotaryPositionalEmbeddings, _ = load("modules.position_embeddings", "RotaryPositionalEmbeddings",
                                     "harness.adapters.torchtune_scaled_rope")
__version__ = "0.6.1"
HARNESS_CONVENTIONS = {"rope_layout": "interleaved"}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")

#: the length of the modules' cache (torchtune's ``max_seq_len``): positions must stay below it
MAX_POSITIONS = 4096


class ScaledRotaryEmbedding(torch.nn.Module):
    """torchtune's module for the rule, in the protocol's layout."""

    def __init__(self, dim, base=10000.0, scaling=None):
        super().__init__()
        rule = (scaling or {}).get("rope_type", "default")
        if float((scaling or {}).get("partial_rotary_factor", 1.0)) != 1.0:
            raise NotImplementedError("torchtune's rotary modules rotate the dim they are given (no partial_rotary_factor)")
        if rule == "default":
            self.rope = RotaryPositionalEmbeddings(dim, max_seq_len=MAX_POSITIONS, base=base)
        elif rule == "llama3":
            self.rope = Llama3ScaledRoPE(dim, max_seq_len=MAX_POSITIONS, base=base, scale_factor=scaling["factor"],
                                         low_freq_factor=scaling["low_freq_factor"],
                                         high_freq_factor=scaling["high_freq_factor"],
                                         old_context_len=scaling["original_max_position_embeddings"])
        else:
            raise NotImplementedError(f"torchtune has no {rule!r} RoPE scaling (only Llama3ScaledRoPE)")

    def forward(self, x, positions):
        if int(positions.max()) >= MAX_POSITIONS:
            raise ValueError(f"position {int(positions.max())} is past the cache of {MAX_POSITIONS} positions")
        input_pos = positions.to(x.device)[None].expand(x.shape[0], -1)
        return self.rope(x.transpose(1, 2), input_pos=input_pos).transpose(1, 2)
