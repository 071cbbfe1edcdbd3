"""Planted bug: with softcap and sinks together, the sink logit is soft-capped like a score.

Real pattern: the sink appended to the scores as one more column before the cap is applied to the
whole row (attention-sink kernels that treat the sink as a virtual key). Softcap alone is right,
sinks alone are right. Caught by: options_together.kvcache.
Message: softcap
Message: sinks
Alone: test_paged_kvcache.py -k test_softcap or test_sinks
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kvcache"))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    def attend(self, q, keys, vals, visible, scale, softcap=None, sinks=None):
        if softcap and sinks is not None:
            sinks = softcap * torch.tanh(sinks / softcap)  # BUG: the sink is not a score
        return super().attend(q, keys, vals, visible, scale, softcap, sinks)


attention_with_kvcache = Planted().attention_with_kvcache
