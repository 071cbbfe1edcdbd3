"""Planted bug: positions past the table wrap around (position max_positions reads row 0).

Real pattern: ``position_ids % max_position_embeddings`` in streaming/sliding-window code.
Caught by: learned_positions.out_of_range.
Message: wrapped around
Message: positions outside the table must raise
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Learned  # noqa: E402


class Planted(Learned):
    def index(self, positions):
        return positions % self.max_positions  # BUG: should raise


LearnedPositionEmbedding = Planted
