"""Planted bug: positions are shifted by 2 (OPT's padding offset) without enlarging the
table, so position p reads row p + 2 and the last two positions do not exist.

Real pattern: ``OPTLearnedPositionalEmbedding`` adds ``offset = 2`` and allocates
``num_embeddings + 2`` rows; ports that copy the offset but not the larger table.
Caught by: learned_positions.lookup.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Learned  # noqa: E402


class Planted(Learned):
    def index(self, positions):
        return super().index(positions + 2)  # BUG: offset without a larger table


LearnedPositionEmbedding = Planted
