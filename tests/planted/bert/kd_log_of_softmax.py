"""Planted bug: log(softmax(student)) instead of log_softmax: -inf for confident logits.

Real pattern: ``torch.log(F.softmax(s / T))`` underflows to log(0) = -inf once a logit gap
exceeds ~100 (float32) or ~17 (float16), so the loss becomes inf. Caught by:
distillation.agreement.
Message: inf
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch.nn.functional as F  # noqa: E402

from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def student_log_probs(self, s, T):
        return F.softmax(s / T, dim=-1).log()  # BUG: not log_softmax


distillation_loss = Planted().distillation_loss
