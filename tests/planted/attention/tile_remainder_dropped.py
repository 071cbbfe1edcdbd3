"""Planted bug: keys are processed in tiles of 16 with an online softmax, and the
number of tiles is ``S // 16`` (at least 1), so the last S % 16 keys are dropped
whenever S > 16 is not a multiple of 16.

Real pattern: a tiled kernel whose loop bound is ``seq_len // BLOCK_N`` instead of
``cdiv(seq_len, BLOCK_N)`` (kernels derived from the Triton fused-attention tutorial,
which assumes the length is a multiple of the block). Caught by: attention.agreement.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

TILE = 16


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        if dropout_p > 0.0:
            return super().attend(q, k, v, scale, visible, bias, dropout_p)
        S = k.shape[-2]
        n_tiles = max(1, S // TILE)  # BUG: floor; should be ceil(S / TILE)
        m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype, device=q.device)
        den = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
        for t in range(n_tiles):
            cols = slice(t * TILE, (t + 1) * TILE)
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
            acc = acc * corr + p @ v[..., cols, :]
            m = m_new
        return torch.where(den > 0, acc / den.clamp_min(torch.finfo(den.dtype).tiny), torch.zeros_like(acc))


scaled_dot_product_attention = Planted().scaled_dot_product_attention
