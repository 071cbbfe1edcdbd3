"""Planted bug: 2 points too few tokens selected (13 % instead of 15 %).

Real pattern: a rate that drifted from the configured one -- a stale hard-coded constant, or
a budget computed from another quantity (e.g. 15 % of the non-padding tokens scaled by a
stale 13/15) -- invisible in training logs. The smallest effect the selection test must
catch. Caught by: mlm.selection_rate.
Message: mlm_probability = 0.15
Message: a correct implementation is within
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def rate(self, mlm_probability):
        return mlm_probability - 0.02  # BUG: 13 % for 15 %


mask_tokens = Planted().mask_tokens
