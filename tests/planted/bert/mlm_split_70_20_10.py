"""Planted bug: the replacement split is 70/20/10 instead of 80/10/10.

Real pattern: thresholds written as cumulative cut points on one uniform draw with the wrong
first cut (``u < 0.7`` for [MASK]), or mask/random probabilities swapped in a config.
Caught by: mlm.replacement_split.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def branch_thresholds(self):
        return 0.7, 0.9  # BUG


mask_tokens = Planted().mask_tokens
