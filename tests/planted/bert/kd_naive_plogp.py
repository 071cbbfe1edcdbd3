"""Planted bug: p log p computed naively, so a confident teacher gives NaN.

Real pattern: ``(p_t * (torch.log(p_t) - log_p_s)).sum()``: where the teacher's probability
underflows to 0, ``0 * log 0 = 0 * -inf = NaN`` (kl_div and xlogy define it as 0). Caught by:
distillation.one_hot.
Message: NaN
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def divergence(self, log_ps, pt):
        return (pt * (pt.log() - log_ps)).sum()  # BUG: 0 * -inf


distillation_loss = Planted().distillation_loss
