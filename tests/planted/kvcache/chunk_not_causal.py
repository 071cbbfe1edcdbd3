"""Planted bug: a chunk appended to a non-empty cache is attended without the causal mask: the
kernel treats every call after the prefill as decoding, where one query sees every cached key.

Real pattern: a decode path written for q_len == 1 (no mask needed) reused for chunked prefill
or speculative-decoding verification (q_len > 1), where the queries of a chunk then see the
chunk's later tokens. The prefill and single-token steps are right; only a chunk of two or more
tokens after the first call is wrong. Caught by: kvcache.chunked_prefill.
Message: against one causal call
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def mask(self, q_pos, key_pos, causal, window):
        if int(q_pos[0]) > 0:  # BUG: "after the prefill everything is decoding": no causal mask
            causal = False
        return super().mask(q_pos, key_pos, causal, window)


attention_with_kvcache = Planted().attention_with_kvcache
