"""Planted bug: query row i is taken to sit at position i (aligned to the first key) and
the distance is |i - j|, so with fewer queries than keys (a KV cache) the last query is
penalised for attending to its own recent keys.

Real pattern: symmetric ALiBi (``-slope * |i - j|``) built from ``arange(Lq)`` and
``arange(Lk)`` without the ``Lk - Lq`` offset, as in incremental-decoding bugs of ALiBi ports.
Caught by: alibi.end_alignment.
Message: aligned to the end of the keys
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    def distance(self, query_len, key_len):
        return (torch.arange(query_len)[:, None] - torch.arange(key_len)[None, :]).abs().float()  # BUG


alibi_bias = Planted().alibi_bias
