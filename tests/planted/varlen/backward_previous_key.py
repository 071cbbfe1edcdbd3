"""Planted bug: the backward's key loop starts one row before the sequence.

Real pattern: the backward kernel's key-block start computed as ``cu_seqlens_k[b] - 1`` (an
off-by-one against the forward's): the previous sequence's last key is treated as visible to
every query, so dK/dV of that key collect gradient from another sequence. The forward is right.
Caught by: varlen_grad.isolation.
Message: must be exactly 0
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def grad_surrogate(self, ctx):
        ks, ke = ctx["ks"], ctx["ke"]
        if ks == 0:
            return None
        rows = torch.arange(ks - 1, ke, device=ctx["kf"].device)  # BUG: one key row early
        kb = ctx["kf"][rows].index_select(1, ctx["heads"]).transpose(0, 1)
        vb = ctx["vf"][rows].index_select(1, ctx["heads"]).transpose(0, 1)
        first = torch.ones(ctx["visible"].shape[0], 1, dtype=torch.bool, device=kb.device)
        visible = torch.cat([first, ctx["visible"]], dim=1)
        return self.attend(ctx["qb"], kb, vb, visible, ctx["scale"], ctx["softcap"], ctx["sinks"])


attention_varlen = Planted().attention_varlen
