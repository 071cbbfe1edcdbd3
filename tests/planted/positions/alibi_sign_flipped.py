"""Planted bug: the bias is +slope * distance, rewarding distant keys instead of penalising them.

Real pattern: computing ``relative = query_pos - key_pos`` where the code expects
``key_pos - query_pos`` (or the reverse) before multiplying by the slopes.
Caught by: alibi.linear_bias.
Message: penalises distance
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    def alibi_bias(self, num_heads, query_len, key_len):
        return self.head_slopes(num_heads)[:, None, None] * self.distance(query_len, key_len)[None]  # BUG: sign


alibi_bias = Planted().alibi_bias
