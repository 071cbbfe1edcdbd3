"""Planted bug: the chunk of a query is taken from its row index, not its absolute position: with a
KV cache (L < S, a decoding step) the query is placed in the first chunk and attends to its keys.

Real pattern: mask builders that forget the cache position offset (``q_offset``/``cache_position``)
for the chunked pattern while the causal part gets it right.
Caught by: chunked_attention.agreement
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def chunk_visible(self, L, S, chunk, device):
        i = torch.arange(L, device=device)[:, None]
        p = i + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j <= p) & (j // chunk == i // chunk)  # BUG: the row index i, not the position p


chunked_attention = Planted().chunked_attention
