"""Planted bug: the softcap is applied after the mask: a masked score (-inf) becomes
-softcap, so masked keys get a weight of exp(-softcap - max) instead of 0.

Real pattern: Gemma 2's attention written as mask-then-cap (scores.masked_fill(...) and then
softcap * tanh(scores / softcap)), or an additive mask added before the tanh; harmless without
masked keys (single-token decoding) and when the softcap is large (50: exp(-50) vanishes), wrong
for a chunk of queries under a small softcap. Caught by: kvcache.softcap.
Message: softcap
Message: the outputs
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def capped(self, scores, visible, softcap):
        scores = scores.masked_fill(~visible, float("-inf"))  # BUG: masked first, then capped
        return softcap * torch.tanh(scores / softcap) if softcap else scores


attention_with_kvcache = Planted().attention_with_kvcache
