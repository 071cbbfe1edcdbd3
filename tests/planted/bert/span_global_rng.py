"""Planted bug: the generator argument is ignored; the global torch RNG is used.

Real pattern: numpy/torch global RNG calls inside a data pipeline that claims to be seeded
(``np.random.permutation`` in ports of T5's ``random_spans_noise_mask``). Caught by:
span_corruption.generator.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _span_base import SpanCorruption  # noqa: E402


class Planted(SpanCorruption):
    def rng(self, generator):
        return None  # BUG


span_corruption = Planted().span_corruption
