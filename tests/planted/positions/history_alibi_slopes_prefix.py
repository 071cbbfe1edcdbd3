"""Planted bug: ``alibi_slopes`` computes the slopes once for the most heads seen so far and serves
a smaller head count the first H of them; get_slopes(H) is not a prefix of get_slopes(H') (the
geometric ratio is 2^(-8/H)). Each call alone, or in increasing head counts, is right.

Real pattern: ``self.slopes = get_slopes(max_heads)`` registered once as a buffer, sliced
``[:num_heads]`` for a pruned or smaller model (the same cache as history_alibi_slopes_sliced.py,
behind the slopes function instead of the bias).
Caught by: history.alibi_slopes (a call with more heads, then the first call again).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    table = None

    def head_slopes(self, num_heads):
        if self.table is None or len(self.table) < num_heads:
            self.table = torch.tensor(self.get_slopes(num_heads), dtype=torch.float32)
        return self.table[:num_heads]  # BUG: the first H of another head count's slopes

    def alibi_slopes(self, num_heads):
        return self.head_slopes(num_heads).clone()


alibi_slopes = Planted().alibi_slopes
