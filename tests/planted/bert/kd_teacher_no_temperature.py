"""Planted bug: the teacher's softmax is not softened by T (only the student's is).

Real pattern: ``softmax(teacher_logits)`` where ``softmax(teacher_logits / T)`` was meant
(teacher probabilities precomputed at T = 1 and cached). Caught by: distillation.temperature.
Message: softens only the student
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch.nn.functional as F  # noqa: E402

from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def teacher_probs(self, t, T):
        return F.softmax(t, dim=-1)  # BUG: no / T


distillation_loss = Planted().distillation_loss
