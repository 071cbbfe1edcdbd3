"""Planted bug: query rows are processed in tiles of 64 and the grid is ``L // 64`` tiles (at
least one), so the last L % 64 query rows are never written (zeros) once L > 64.

Real pattern: a launch grid computed with floor division, ``grid = (L // BLOCK_M, B * H)``, in a
kernel only ever tested with L a multiple of the block or below one block.
Caught by: attention.agreement.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

BLOCK_M = 64


class Planted(Attention):
    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        out = super().attend(q, k, v, scale, visible, bias, dropout_p)
        L = q.shape[-2]
        done = max(1, L // BLOCK_M) * BLOCK_M
        if done < L:
            out = out.clone()
            out[..., done:, :] = 0  # BUG: the ragged last tile of rows is never computed
        return out


scaled_dot_product_attention = Planted().scaled_dot_product_attention
