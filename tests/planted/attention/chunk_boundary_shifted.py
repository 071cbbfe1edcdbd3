"""Planted bug: the chunk boundaries are shifted by one position ((j + 1) // chunk): the first query of
every chunk after the first also sees the last key of the previous chunk.

Real pattern: chunks counted from 1-based positions, or boundaries computed from the number of keys
seen (``p + 1``) on one side of the comparison only.
Caught by: chunked_attention.chunk_start
Message: must return their own key's value
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def chunk_visible(self, L, S, chunk, device):
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j <= p) & ((j + 1) // chunk == (p + 1) // chunk)  # BUG: boundaries one position late


chunked_attention = Planted().chunked_attention
