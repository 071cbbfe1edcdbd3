"""Planted bug: random replacement drawn with the unconditional 10 % inside the remaining 20 %.

Real pattern: after choosing [MASK] with probability 0.8, choosing "random" with probability
0.1 among the rest instead of 0.1 / 0.2 = 0.5 (transformers rescales exactly to avoid this):
80/2/18. Caught by: mlm.replacement_split.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def branches(self, selected, g):
        to_mask = selected & (torch.rand(selected.shape, generator=g) < 0.8)
        rest = selected & ~to_mask
        return to_mask, rest & (torch.rand(selected.shape, generator=g) < 0.1)  # BUG: not 0.1 / 0.2


mask_tokens = Planted().mask_tokens
