"""Planted bug: the rotary module's dynamic update only grows: after a long prompt grew the NTK base,
a prompt shorter than the original length keeps the grown base instead of plain RoPE.

Real pattern: the dynamic NTK modules before Hugging Face's reset (transformers' early
``LlamaDynamicNTKScalingRotaryEmbedding`` recomputed only when ``seq_len > max_seq_len_cached``), and
serving engines' copies of it.
Caught by: scaled_rope_module.call_sequences
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def update(self, seq_len):
        if self.rule == "dynamic" and seq_len > self.cached:  # BUG: grows, never resets
            self.inv, self.att = self.frequencies().rope_frequencies(self.dim, self.base, self.scaling, seq_len)
            self.cached = seq_len
        elif self.rule != "dynamic":
            super().update(seq_len)


ScaledRotaryEmbedding = Planted
