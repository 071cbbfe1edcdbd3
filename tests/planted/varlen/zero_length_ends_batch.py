"""Planted bug: a zero-length sequence ends the loop over sequences.

Real pattern: cu_seqlens read as a list terminated by its padding (repeated last entries mark
unused batch slots), so the first empty sequence is taken for the end of the batch and every
later sequence is left at zero. Caught by: varlen.zero_length.
Message: empty on one side or both
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def sequences(self, cu_q, cu_k):
        out = []
        for seq in super().sequences(cu_q, cu_k):
            if seq[1] == seq[0]:
                break  # BUG: an empty sequence taken for the padding at the end
            out.append(seq)
        return out


attention_varlen = Planted().attention_varlen
