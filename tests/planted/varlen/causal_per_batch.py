"""Planted bug: the causal offset is taken per batch (max_seqlen_k - max_seqlen_q).

Real pattern: the bottom-right shift computed once from the launch sizes, as for a padded
batch, and not from each sequence's own lengths: right when every sequence has the same Lk - Lq,
wrong for a packed batch whose sequences differ. Caught by: varlen.causal.
Message: causal bottom-right per sequence
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def offset(self, Lq, Lk, max_q, max_k):
        return max_k - max_q  # BUG: the batch's shift for every sequence


attention_varlen = Planted().attention_varlen
