"""Planted bug: the module picks LongRoPE's long or short factors by the number of tokens in the call
(``x.shape[-2]``), not by the position reached: a decoding step past the original length (one token
at position 5000) gets the short factors.

Real pattern: rotary modules that take ``seq_len = x.shape[-2]`` (the prompt's length) as the length
of the sequence, which holds for a prefill from position 0 and not for a decoding step.
Caught by: scaled_rope_module.agreement
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import HARNESS_CONVENTIONS, HARNESS_DTYPES, ScaledRope  # noqa: E402,F401


class Planted(ScaledRope):
    def seq_len(self, x, positions):
        if self.rule == "longrope":
            return x.shape[-2]  # BUG: the tokens of this call, not max(positions) + 1
        return super().seq_len(x, positions)


ScaledRotaryEmbedding = Planted
