"""Planted bug: KL(student || teacher) instead of KL(teacher || student).

Real pattern: ``kl_div(log_softmax(teacher), softmax(student))`` -- torch's kl_div takes the
*target* distribution second, and swapping the arguments gives the reverse (mode-seeking) KL.
Caught by: distillation.direction.
Message: KL(student || teacher)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch.nn.functional as F  # noqa: E402

from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def divergence(self, log_ps, pt):
        return F.kl_div(pt.log(), log_ps.exp(), reduction="sum")  # BUG: arguments swapped


distillation_loss = Planted().distillation_loss
