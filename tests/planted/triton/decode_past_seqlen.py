"""Planted bug: the decode kernel reads one cache slot past cache_seqlens.

Real pattern: ``seqlen_k = cache_seqlens[b] + 1`` (an inclusive length): the slot after the
filled part (stale or unwritten memory) is attended to as a key, and every query sits one
position late.
Caught by: kvcache.unfilled_slots (the slots past the filled part are poisoned).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("kvcache", "c = tl.load(SEQ + b)  # positions already cached",
              "c = tl.load(SEQ + b) + 1  # BUG: one slot past cache_seqlens"),
       globals(), "attention_with_kvcache")
