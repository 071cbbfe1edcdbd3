"""Knowledge-distillation loss (Hinton, Vinyals & Dean 2015; DistilBERT), in float64.

    student_logits, teacher_logits (*lead, C)      -> scalar
    p_T = softmax(teacher / T),  p_S = softmax(student / T)
    loss = T^2 * mean over the rows of KL(p_T || p_S)
    KL(p_T || p_S) = sum_i p_T(i) * (log p_T(i) - log p_S(i))    (0 log 0 = 0)

Reduction: the mean over all leading positions (*lead flattened: B rows for (B, C),
B*S rows for (B, S, V)). This is DistilBERT's ``KLDivLoss(reduction="batchmean")``
applied to the flattened (rows, C) logits. Alternatives that are not this protocol:
``kl_div(..., reduction="batchmean")`` on an unflattened (B, S, V) input divides the
sum by B only; ``reduction="mean"`` also divides by C; ``"sum"`` does not divide.

The T^2 factor keeps the gradient's scale roughly independent of T: the gradient
w.r.t. the student logits is T * (p_S - p_T) / rows, and p_S - p_T shrinks like 1/T.
With a one-hot teacher at T = 1, KL(p_T || p_S) = CE(p_T, p_S) - H(p_T) = -log p_S(y).
"""
from __future__ import annotations

import torch


def kl_rows(student_logits, teacher_logits, temperature=1.0, compute_dtype=torch.float64):
    """T^2 * KL(p_T || p_S) per row, (*lead), in ``compute_dtype`` (differentiable)."""
    s = student_logits.to(compute_dtype) / temperature
    t = teacher_logits.to(compute_dtype) / temperature
    log_ps = torch.log_softmax(s, dim=-1)
    log_pt = torch.log_softmax(t, dim=-1)
    pt = log_pt.exp()
    kl = (torch.xlogy(pt, pt) - pt * log_ps).sum(dim=-1)  # xlogy: 0 * log 0 = 0
    return kl * temperature ** 2


def distillation_math(student_logits, teacher_logits, temperature=1.0, compute_dtype=torch.float64):
    """The loss in ``compute_dtype`` (the truth in float64; the naive yardstick in the input dtype)."""
    return kl_rows(student_logits, teacher_logits, temperature, compute_dtype).mean()


def distillation_kl_div(student_logits, teacher_logits, temperature=1.0, compute_dtype=torch.float64):
    """The same loss the way most code writes it (DistilBERT, Hinton et al.'s recipe):
    ``kl_div(log_softmax(s / T), softmax(t / T), reduction="sum") / rows * T^2``. Identical in
    exact arithmetic; in a low precision it rounds differently from ``distillation_math`` (it
    takes the log of the rounded teacher probabilities), so the suites measure a same-precision
    implementation's error as the larger of the two."""
    s = (student_logits.to(compute_dtype) / temperature).reshape(-1, student_logits.shape[-1])
    t = (teacher_logits.to(compute_dtype) / temperature).reshape(-1, teacher_logits.shape[-1])
    kl = torch.nn.functional.kl_div(torch.log_softmax(s, dim=-1), torch.softmax(t, dim=-1), reduction="sum")
    return kl / s.shape[0] * temperature ** 2


def cross_entropy_math(student_logits, target_ids, compute_dtype=torch.float64):
    """mean over rows of -log softmax(student)[y]: what KL reduces to for a one-hot teacher at T = 1."""
    log_ps = torch.log_softmax(student_logits.to(compute_dtype), dim=-1)
    return -log_ps.gather(-1, target_ids.unsqueeze(-1)).squeeze(-1).mean()


def distillation_loss(student_logits, teacher_logits, temperature=1.0):
    return distillation_math(student_logits, teacher_logits, temperature).to(student_logits.dtype)
