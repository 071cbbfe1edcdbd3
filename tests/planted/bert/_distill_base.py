"""A correct distillation loss (DistilBERT style: ``kl_div(..., reduction="batchmean")`` on the
flattened rows, times T^2), split into hooks.

Every planted distillation bug in this folder subclasses ``Distillation`` and overrides ONE
hook; unmodified it passes every ``distillation.*`` property.
"""
from __future__ import annotations

import torch.nn.functional as F


class Distillation:
    def rows(self, x):
        """(*lead, C) -> (rows, C)."""
        return x.reshape(-1, x.shape[-1])

    def student_log_probs(self, s, T):
        return F.log_softmax(s / T, dim=-1)

    def teacher_probs(self, t, T):
        return F.softmax(t / T, dim=-1)

    def divergence(self, log_ps, pt):
        """KL(p_T || p_S) summed over the batch (kl_div's target is the teacher)."""
        return F.kl_div(log_ps, pt, reduction="sum")

    def reduce(self, total, rows: int, lead_shape):
        return total / rows

    def scale(self, T):
        return T ** 2

    def distillation_loss(self, student_logits, teacher_logits, temperature=1.0):
        T = temperature
        s, t = self.rows(student_logits), self.rows(teacher_logits)
        total = self.divergence(self.student_log_probs(s, T), self.teacher_probs(t, T))
        return self.reduce(total, s.shape[0], student_logits.shape[:-1]) * self.scale(T)


distillation_loss = Distillation().distillation_loss
