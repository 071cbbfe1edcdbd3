"""Planted bug: every sequence reads max_seqlen_k key rows from its start.

Real pattern: a kernel ported from the padded layout, whose key loop runs to the grid size
``max_seqlen_k`` with no clamp to the sequence's own end: a shorter sequence attends to the first
keys of the next one. Caught by: varlen.isolation.
Message: rewritten to +-1e4 changed the rows
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def key_range(self, ks, ke, max_k):
        return ks, ks + max_k  # BUG: no clamp to this sequence's end


attention_varlen = Planted().attention_varlen
