"""Planted bug: no random replacement: 80/0/20.

Real pattern: the random-token branch dropped (e.g. a torch port that only masks and
"keeps the rest"). Caught by: mlm.replacement_split.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def branch_thresholds(self):
        return 0.8, 0.8  # BUG: empty random band


mask_tokens = Planted().mask_tokens
