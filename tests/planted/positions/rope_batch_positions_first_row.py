"""Planted bug: for per-batch positions (B, L) only the first row is used, so every
sequence in the batch is rotated with sequence 0's positions.

Real pattern: ``position_ids[0]`` in a port of code written for batch size 1 (left-padded or
packed batches then get wrong positions for every sequence but the first).
Caught by: rope.agreement ((B, L) positions).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def positions(self, positions):
        return positions[0] if positions.dim() == 2 else positions  # BUG: row 0 for every sequence


apply_rotary_embedding = Planted().apply_rotary_embedding
