"""Planted bug: a plain ``apply_rotary_embedding`` keeps one cached rotary module per (dim, base)
behind the function; a call at offset o computes the rows for positions o .. o + L - 1 and stores
them as the table's rows 0 .. L - 1, so a later call from offset 0 (same dim and base) reads the
rows of another call. Each call alone is right.

Real pattern: a user's function over rotary-embedding-torch 0.8.2 (a module per (dim, theta) in a
dict, ``rotary(positions, seq_len=L, offset=o)`` for contiguous positions): 0.8.2 wrote
``cached_freqs[:seq_len]`` for freqs at positions offset .. (0.8.3 caches only at offset 0).
Caught by: history.apply_rotary_embedding (offset 0, then an offset, then offset 0 again).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402
from stateful_rope_offset_cache_rows import Planted as OffsetCache  # noqa: E402  (the same cache bug, as a module)


_MODULES = {}
_STATELESS = Rope()


def apply_rotary_embedding(x, positions, base=10000.0):
    L = x.shape[-2]
    contiguous = positions.dim() == 1 and bool((positions - positions[0] == torch.arange(L, device=positions.device)).all())
    if not contiguous:
        return _STATELESS.apply_rotary_embedding(x, positions, base)
    module = _MODULES.setdefault((x.shape[-1], float(base)), OffsetCache(x.shape[-1], base))
    return module(x, int(positions[0]))
