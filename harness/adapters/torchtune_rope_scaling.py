"""torchtune's scaled RoPE as ``rope_frequencies``: ``Llama3ScaledRoPE`` (``torchtune.models.llama3_1``,
torchtune 0.6.1) for the ``llama3`` rule and ``RotaryPositionalEmbeddings`` for plain RoPE.

    --impl harness.adapters.torchtune_rope_scaling     (pip install --no-deps torchtune==0.6.1)

Both modules hold their frequencies as the ``theta`` buffer, built as its Llama 3.1 builders build
it (``Llama3ScaledRoPE(dim, max_seq_len, base, scale_factor, low_freq_factor, high_freq_factor,
old_context_len)``); the adapter reads it. The cache table is built for one position only (its
length is not what this name checks). torchtune has no other scaling rule: linear, dynamic, yarn
and longrope raise NotImplementedError (unsupported); its attention factor is 1.
"""
from __future__ import annotations

from harness.adapters.torchtune_files import load

Llama3ScaledRoPE, _SOURCE = load("models.llama3_1._position_embeddings", "Llama3ScaledRoPE",
                                 "harness.adapters.torchtune_rope_scaling")
RotaryPositionalEmbeddings, _ = load("modules.position_embeddings", "RotaryPositionalEmbeddings",
                                     "harness.adapters.torchtune_rope_scaling")
__version__ = "0.6.1"


def rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None):
    rule = (scaling or {}).get("rope_type", "default")
    if float((scaling or {}).get("partial_rotary_factor", 1.0)) != 1.0:
        raise NotImplementedError("torchtune's module rotates the dim it is given (no partial_rotary_factor)")
    if rule == "default":
        return RotaryPositionalEmbeddings(dim, max_seq_len=1, base=base).theta, 1.0
    if rule != "llama3":
        raise NotImplementedError(f"torchtune has no {rule!r} RoPE scaling (only Llama3ScaledRoPE)")
    rope = Llama3ScaledRoPE(dim, max_seq_len=1, base=base, scale_factor=scaling["factor"],
                            low_freq_factor=scaling["low_freq_factor"], high_freq_factor=scaling["high_freq_factor"],
                            old_context_len=scaling["original_max_position_embeddings"])
    return rope.theta, 1.0
