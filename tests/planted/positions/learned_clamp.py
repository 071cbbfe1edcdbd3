"""Planted bug: positions past the table are clamped to its last row.

Real pattern: ``position_ids.clamp(max=max_position_embeddings - 1)`` to "support" longer
inputs (BERT-style models then silently reuse position 511 for every later token).
Caught by: learned_positions.out_of_range.
Message: clamped
Message: positions outside the table must raise
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Learned  # noqa: E402


class Planted(Learned):
    def index(self, positions):
        return positions.clamp(0, self.max_positions - 1)  # BUG: should raise


LearnedPositionEmbedding = Planted
