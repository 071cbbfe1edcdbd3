"""Planted bug: the cached ALiBi module slices its kept bias ``[..., :Lq, :Lk]``: the rows of the
FIRST queries, so after a prefill of 10 a decoding call (1, 5) gets position 0's row, not 4's.

Real pattern: x-transformers up to 1.22.16, ``AlibiPositionalBias.forward``:
``return self.bias[..., :i, :j]`` (1.22.17: ``[..., -i:, -j:]``).
Caught by: alibi_module.call_sequences (fewer queries, or fewer keys, after a longer call).
Message: on a fresh instance the same call is right
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import CachedAlibi  # noqa: E402


class Planted(CachedAlibi):
    def piece(self, query_len, key_len):
        return self.bias[..., :query_len, :key_len]  # BUG: the first rows and columns, not the last


AlibiPositionalBias = Planted
