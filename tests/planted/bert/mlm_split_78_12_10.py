"""Planted bug: the replacement split is 78/12/10 instead of 80/10/10 (2-point error).

Real pattern: a slightly wrong cumulative threshold (``u < 0.78``); the smallest split error
the replacement test must catch. Caught by: mlm.replacement_split.
Message: expected 80/10/10
Message: mask by -
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def branch_thresholds(self):
        return 0.78, 0.9  # BUG: 78/12/10


mask_tokens = Planted().mask_tokens
