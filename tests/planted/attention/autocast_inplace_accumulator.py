"""Planted bug: the kernel accumulates ``weights @ values`` into a float32 buffer with an in-place
``baddbmm_``; under ``torch.autocast`` the weights come out of the score matmul in bfloat16 and the
in-place op, which autocast does not cast, raises a dtype mismatch. Outside autocast it is right.

Real pattern: fp32 accumulators updated in place with autocast-lowered operands (``out.addmm_``,
``acc.baddbmm_``), a frequent "works in eval, crashes in mixed-precision training" report.
Caught by: attention.autocast.
Message: implementation error
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        s = self.scores(q, k, scale)
        if bias is not None:
            s = s + bias
        if visible is not None:
            s = self.apply_visibility(s, visible)
        w = self.dropout(self.softmax(s), dropout_p)
        lead = w.shape[:-2]
        acc = torch.zeros(*lead, q.shape[-2], v.shape[-1], dtype=torch.float32, device=q.device)
        flat = acc.reshape(-1, q.shape[-2], v.shape[-1])
        flat.baddbmm_(w.reshape(-1, *w.shape[-2:]), v.reshape(-1, *v.shape[-2:]))  # BUG under autocast
        return flat.reshape(acc.shape).to(q.dtype)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
