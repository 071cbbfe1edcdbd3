"""Planted bug: RoPE rotates each call's tokens at positions 0 .. Lnew - 1, not at their absolute
positions cache_seqlens + i: a decode step does not advance the rotary position.

Real pattern: position ids rebuilt as ``arange(seq_len)`` of the current input during
generation (the bug behind several "garbage after the first token" reports in model ports),
or a rotary kernel called without its ``seqlen_offsets``. The prefill (offset 0) is right, every
decode step is wrong. Caught by: kvcache.rotary.
Message: keys rotated at their positions
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def rotary_offset(self, c, start):
        return 0  # BUG: every call rotates from position 0


attention_with_kvcache = Planted().attention_with_kvcache
