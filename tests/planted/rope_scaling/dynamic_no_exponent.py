"""Planted bug: dynamic NTK grows the base by the NTK alpha itself, without the exponent dim / (dim - 2).

Real pattern: the base rescaling of the NTK-aware post copied as ``base * alpha``.
Caught by: rope_scaling.dynamic
Message: dynamic at seq_len
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def dynamic_base(self, dim, base, s, seq_len):
        orig, factor = s["original_max_position_embeddings"], s["factor"]
        length = max(seq_len or orig, orig)
        return base * ((factor * length / orig) - (factor - 1))  # BUG: no ** (dim / (dim - 2))


rope_frequencies = Planted().rope_frequencies
