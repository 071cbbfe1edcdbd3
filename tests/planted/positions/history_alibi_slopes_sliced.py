"""Planted bug: ``alibi_bias`` builds its slope table once for the most heads seen so far and
serves a call with fewer heads the table's first H slopes; but get_slopes(H) is not a prefix of
get_slopes(H') (the geometric ratio is 2^(-8/H)), so after a call with more heads every smaller
head count gets the wrong slopes. Each call alone, or in increasing head counts, is right.

Real pattern: ALiBi code that precomputes ``slopes = get_slopes(max_heads)`` once (a module-level
or class-level buffer) and slices ``slopes[:num_heads]`` for a smaller model or a pruned head set.
Caught by: history.alibi_bias (a call with more heads, then the first call again).
Message: differs after the calls before it on the same target
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


alibi_bias = Planted().alibi_bias
