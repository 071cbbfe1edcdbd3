"""Planted bug: the ``base`` argument is ignored and 10000 is always used.

Real pattern: Llama 3 (rope_theta 500000) or Code Llama (1e6) run through code with a
hard-coded 10000 (e.g. an older ``LlamaRotaryEmbedding(dim)`` constructed without
``base=config.rope_theta``).
Caught by: rope.frequencies (bases other than 10000).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def inv_freq(self, dim, base, dtype):
        return super().inv_freq(dim, 10000.0, dtype)  # BUG: the given base is ignored


apply_rotary_embedding = Planted().apply_rotary_embedding
