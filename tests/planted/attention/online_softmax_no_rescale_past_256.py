"""Planted bug: an online softmax over key tiles of 128 that forgets to rescale the earlier tiles'
accumulator when a later tile raises the running max -- only on the long-sequence path, used for
S > 256; shorter sequences take a one-pass path that is right.

Real pattern: a split-KV / long-context variant of a kernel (FlashDecoding-style) whose combine
step drops the ``exp(m_old - m_new)`` correction. Caught by: attention.agreement.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

TILE = 128


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        S = k.shape[-2]
        if dropout_p > 0.0 or S <= 2 * TILE:
            return super().attend(q, k, v, scale, visible, bias, dropout_p)
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
            den = den + p.sum(dim=-1, keepdim=True)  # BUG: no * exp(m - m_new) on den and acc
            acc = acc + p @ v[..., cols, :]
            m = m_new
        return torch.where(den > 0, acc / den.clamp_min(torch.finfo(den.dtype).tiny), torch.zeros_like(acc))


scaled_dot_product_attention = Planted().scaled_dot_product_attention
