"""Planted bug: chunked attention served by a sliding window of the chunk's size: a query late in a
chunk is right, but one early in a chunk also sees the last keys of the previous chunk.

Real pattern: a backend without chunked attention that maps Llama 4's ``attention_chunk_size`` onto
its sliding-window kernel (the two look alike in a config and a mask picture of the first chunk).
Caught by: chunked_attention.other_chunks
Message: belong to earlier chunks
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def chunk_visible(self, L, S, chunk, device):
        return self.window_visible(L, S, chunk, device)  # BUG: a window, not chunks


chunked_attention = Planted().chunked_attention
