"""Planted bug: the softcap is applied to the raw q.k, the scale after it.

Real pattern: ``tanh(q @ k.T / softcap) * softcap * scale``: the cap in the wrong units (Gemma 2
caps the scaled scores). Caught by: varlen.softcap.
Message: softcap
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def scores(self, q, k, scale, softcap):
        s = q @ k.transpose(-2, -1)
        return (softcap * torch.tanh(s / softcap) if softcap else s) * scale  # BUG: capped before the scale


attention_varlen = Planted().attention_varlen
