"""Planted bug: dQ is accumulated key by key in a random order (as atomic adds land), while the
target declares a deterministic backward.

Real pattern: FlashAttention's backward with deterministic=False adds each key block's share of dQ
with atomicAdd, in the order the blocks finish; float addition is not associative, so the last bits
of dQ change from run to run. Named ``backward_determinism: nondeterministic`` (and passes when
declared so); here it declares ``deterministic``, a convention mismatch.
Caught by: attention_grad.deterministic
Message: convention mismatch
Message: backward_determinism: the code follows nondeterministic
Message: differ bitwise
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

HARNESS_CONVENTIONS = {"backward_determinism": "deterministic"}


class Planted(Attention):
    def dq(self, dS, k, scale):
        parts = dS.unsqueeze(-1) * k.unsqueeze(-3)  # (..., L, S, E): each key's share of dQ
        dq = torch.zeros_like(parts[..., 0, :])
        for j in torch.randperm(k.shape[-2]).tolist():  # BUG: the order the atomic adds land in
            dq = dq + parts[..., j, :]
        return dq * scale


scaled_dot_product_attention = Planted().scaled_dot_product_attention
