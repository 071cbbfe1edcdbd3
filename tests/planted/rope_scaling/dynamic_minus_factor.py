"""Planted bug: dynamic NTK grows the base by (factor L / orig - factor) instead of
(factor L / orig - (factor - 1)): at the original length the base collapses to 0.

Real pattern: a re-derivation of the NTK-aware formula that drops the "+ 1" of alpha = s L / orig - s + 1.
Caught by: rope_scaling.identity
Message: at factor 1
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def dynamic_base(self, dim, base, s, seq_len):
        orig, factor = s["original_max_position_embeddings"], s["factor"]
        length = max(seq_len or orig, orig)
        return base * ((factor * length / orig) - factor) ** (dim / (dim - 2))  # BUG: - factor, not - (factor - 1)


rope_frequencies = Planted().rope_frequencies
