"""Planted bug: the sink's term is exp(sink), not exp(sink - row max): the online softmax's
rescaling is applied to the keys' terms but not to the sink's.

Real pattern: gpt-oss-style sinks bolted onto a flash-attention kernel that keeps the row max m
and sums exp(s - m), adding exp(sink) at the end as if it were already rescaled; right only
when the row max is 0. Caught by: kvcache.sinks.
Message: sinks
Message: the outputs
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def sink_term(self, sinks, row_max):
        return torch.exp(sinks.to(row_max.dtype)[:, None, None]).expand_as(row_max)  # BUG: no - max


attention_with_kvcache = Planted().attention_with_kvcache
