"""Planted bug: the keys are sliced with cu_seqlens_q.

Real pattern: a wrapper written for self-attention packing, where the keys are the queries
(Hugging Face derives ``cu_seq_lens_k = cu_seq_lens_q`` from position ids), reused for
cross-attention or a prefix of cached keys: right while every sequence has as many keys as
queries, wrong once they differ. Caught by: varlen.agreement.
Message: against dense attention run per sequence
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def sequences(self, cu_q, cu_k):
        return super().sequences(cu_q, cu_q)  # BUG: cu_seqlens_q for the keys too


attention_varlen = Planted().attention_varlen
