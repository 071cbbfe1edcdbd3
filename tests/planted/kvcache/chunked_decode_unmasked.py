"""Planted bug: a single-token decode step ignores the chunk and sees every cached key.

Real pattern: "a decode step needs no mask" (one query, causal by construction), a shortcut that
drops the chunked mask with it: the prompt is chunked correctly, every generated token then attends
to the whole cache, earlier chunks included. Caught by: kvcache_chunked.other_chunks (and
kvcache_chunked.decode).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def chunk_visible(self, q_pos, key_pos, chunk):
        if len(q_pos) == 1:  # BUG: one query: no mask at all, the chunk's with it
            return torch.ones(1, len(key_pos), dtype=torch.bool, device=q_pos.device)
        return super().chunk_visible(q_pos, key_pos, chunk)


attention_with_kvcache = Planted().attention_with_kvcache
