"""Planted bug: a tiled online softmax (tiles of 4 keys) rescales the running
denominator when the running maximum grows, but not the running output accumulator.
The result depends on where the largest score sits in the key order.

Real pattern: the most common FlashAttention re-implementation bug: forgetting
``acc *= exp(m_old - m_new)`` in the inner loop. Caught by: attention.permutation
(permuting keys and values together changes the output).
Message: keys and values permuted together
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

TILE = 4


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        if dropout_p > 0.0:
            return super().attend(q, k, v, scale, visible, bias, dropout_p)
        S = k.shape[-2]
        m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        den = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
        for start in range(0, S, TILE):
            cols = slice(start, start + TILE)
            s = self.scores(q, k[..., cols, :], scale)
            if bias is not None:
                s = s + bias[..., cols]
            if visible is not None:
                s = self.apply_visibility(s, visible[..., cols])
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - safe)
            corr = torch.exp(m - safe)
            den = den * corr + p.sum(dim=-1, keepdim=True)
            acc = acc + p @ v[..., cols, :]  # BUG: should be acc * corr + p @ v
            m = m_new
        return torch.where(den > 0, acc / den.clamp_min(torch.finfo(den.dtype).tiny), torch.zeros_like(acc))


scaled_dot_product_attention = Planted().scaled_dot_product_attention
