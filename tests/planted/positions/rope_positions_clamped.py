"""Planted bug: positions are clamped to a 4096-entry cos/sin cache instead of extending
it, so every position past 4095 gets the angle of 4095 and scores stop depending on distance.

Real pattern: ``cos_cached[:max_position_embeddings]`` indexed with clamped position ids, or a
KV-cache offset that saturates at the cache length.
Caught by: rope.relative (shifting positions past 4096 changes the scores).
Message: must depend only on the distance
Absent: rope.frequencies
Absent: replayed in float64
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def positions(self, positions):
        return positions.clamp(max=4095)  # BUG: should extend the table


apply_rotary_embedding = Planted().apply_rotary_embedding
