"""Planted bug: the slopes are applied to the heads in reverse order (head 0 gets the
smallest slope).

Real pattern: building the slopes with ``torch.arange(n, 0, -1)`` powers or flipping them for a
"most local head last" layout, then loading a checkpoint trained with the paper's order.
Caught by: alibi.head_slopes.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    def head_slopes(self, num_heads):
        return super().head_slopes(num_heads).flip(0)  # BUG: reversed head order


alibi_bias = Planted().alibi_bias
