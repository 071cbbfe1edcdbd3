"""Planted bug: the backward ignores the causal mask (the forward applies it).

Real pattern: a hand-written backward kernel whose mask flag is not passed through from the
forward's saved context (``ctx.causal`` dropped): dq/dk/dv of causal calls are those of full
attention. Caught by: varlen_grad.agreement.
Message: float64 reference
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def grad_surrogate(self, ctx):
        everything = torch.ones_like(ctx["visible"])  # BUG: no causal mask in the backward
        return self.attend(ctx["qb"], ctx["kb"], ctx["vb"], everything, ctx["scale"], ctx["softcap"], ctx["sinks"])


attention_varlen = Planted().attention_varlen
