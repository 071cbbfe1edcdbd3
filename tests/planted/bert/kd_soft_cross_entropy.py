"""Planted bug: soft cross-entropy -sum p_T log p_S used as "the KL".

Real pattern: soft-target cross-entropy has the same gradient as the KL but differs by the
teacher's entropy H(p_T): it is not 0 when the student matches the teacher, which breaks
loss-based monitoring and early stopping. Caught by: distillation.nonnegative.
Message: entropy
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def divergence(self, log_ps, pt):
        return -(pt * log_ps).sum()  # BUG: + H(p_T)


distillation_loss = Planted().distillation_loss
