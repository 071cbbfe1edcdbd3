"""Planted bug: ``distillation_loss`` keeps the temperature of its first call and ignores the
``temperature`` argument after it. Each call in a fresh process is right.

Real pattern: a distillation criterion built once as ``KDLoss(T=cfg.temperature)`` whose functional
wrapper caches the instance on first use, while a temperature schedule (annealing T over
training, as DistilBERT-style recipes try) passes a new T each step.
Caught by: history.distillation_loss (another temperature after the first call).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    first = None

    def distillation_loss(self, student_logits, teacher_logits, temperature=1.0):
        if self.first is None:
            self.first = temperature
        return super().distillation_loss(student_logits, teacher_logits, self.first)  # BUG


distillation_loss = Planted().distillation_loss
