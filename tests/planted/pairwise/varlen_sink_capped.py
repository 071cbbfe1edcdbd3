"""Planted bug: with softcap and sinks together, the sink logit is soft-capped like a score.

Real pattern: the sink appended to the packed scores as one more column before the cap is applied
to the whole row. Softcap alone is right (varlen.softcap passes), sinks alone are right
(varlen.sinks passes). Caught by: options_together.varlen.
Message: softcap
Message: sinks
Alone: test_varlen.py -k test_softcap or test_sinks
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "varlen"))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def attend(self, q, k, v, visible, scale, softcap, sinks):
        if softcap and sinks is not None:
            sinks = softcap * torch.tanh(sinks / softcap)  # BUG: the sink is not a score
        return super().attend(q, k, v, visible, scale, softcap, sinks)


attention_varlen = Planted().attention_varlen
