"""Planted bug: the wrapper converts (..., H, N, D) to the kernel's (..., N, H, D)
layout with ``reshape`` instead of ``transpose`` (and back the same way), so heads
and positions are mixed whenever H > 1 and N > 1.

Real pattern: ``x.view(B, H, L, D)`` on a (B, L, H*D) projection instead of
``x.view(B, L, H, D).transpose(1, 2)`` -- the classic multi-head reshape bug.
Caught by: attention.multi_head.
Message: differs from attention on head
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def split_heads(self, t):
        *b, h, n, d = t.shape
        bshd = t.reshape(*b, n, h, d)  # BUG: should be t.transpose(-3, -2)
        return bshd.transpose(-3, -2)  # the kernel's own (correct) conversion back to BHSD

    def merge_heads(self, out):
        *b, h, n, d = out.shape
        bshd = out.transpose(-3, -2)  # the kernel returns BSHD
        return bshd.reshape(*b, h, n, d)  # BUG: should be bshd.transpose(-3, -2)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
