"""Planted bug: ``attention_varlen`` caches its sequence boundaries (the block-diagonal layout) by the
packed shape (total queries, total keys) only, so a batch with the same token count split into other
sequences reuses the first batch's boundaries. Each call in a fresh process is right.

Real pattern: a block-diagonal mask or an unpadding index cached by ``q.shape`` / total tokens (a
``functools.lru_cache`` over a helper given the shape, or ``self._mask[(total_q, total_k)]``), reused
by the next packed batch of the same size: in a packing data loader every batch holds the same number
of tokens, so only the split differs.
Caught by: history.attention_varlen (the first call's tokens split into other sequences).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def __init__(self):
        self.layouts = {}

    def sequences(self, cu_q, cu_k):
        key = (int(cu_q[-1]), int(cu_k[-1]))  # BUG: the split (cu_seqlens itself) is not in the key
        if key not in self.layouts:
            self.layouts[key] = super().sequences(cu_q, cu_k)
        return self.layouts[key]


attention_varlen = Planted().attention_varlen
