"""Planted bug: ``chunked_attention`` caches its chunk mask by (L, S) only, so the same shapes with
another chunk size reuse the first call's chunks. Each call in a fresh process is right.

Real pattern: a mask cache keyed on the sequence lengths, shared by layers or models whose chunk
sizes differ (Llama 4 interleaves chunked and global layers; a served model list shares the cache).
Caught by: history.chunked_attention (the first call again with another chunk).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def __init__(self):
        self.masks = {}

    def chunk_visible(self, L, S, chunk, device):
        key = (L, S, str(device))  # BUG: the chunk size is not in the key
        if key not in self.masks:
            self.masks[key] = super().chunk_visible(L, S, chunk, device)
        return self.masks[key]


chunked_attention = Planted().chunked_attention
