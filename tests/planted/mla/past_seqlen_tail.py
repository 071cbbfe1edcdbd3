"""Planted bug: one slot past the item's length joins the keys (an inclusive end, cache_seqlens + 1):
the last new token's key is read twice over, the next stale slot once.

Real pattern: a length taken as the index of the last filled slot plus two, off by one in a split's end.
Caught by: mla.past_seqlen
Message: read past the filled part
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def length(self, cache_seqlens, b, Smax):
        return min(int(cache_seqlens[b]) + 1, Smax)  # BUG: one slot too many


mla_decode = Planted().mla_decode
