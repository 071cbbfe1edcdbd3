"""Planted bug: a sequence's keys are read from the start of the 64-row tile it starts in.

Real pattern: the key loop starts at the tile holding the sequence's first row (block index
ks // BLOCK) and masks by sequence positions counted from there: a sequence that starts in the
middle of a tile sees the tile's first rows (the previous sequence's last keys). Right when
every sequence starts on a tile boundary. Caught by: varlen.tile_offsets.
Message: sequences start at rows
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def key_range(self, ks, ke, max_k):
        return ks // 64 * 64, ke  # BUG: from the tile's first row


attention_varlen = Planted().attention_varlen
