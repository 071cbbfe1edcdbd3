"""Knowledge-distillation loss (the seeds: Hinton et al.; DistilBERT).

    loss = distillation_loss(student_logits, teacher_logits, temperature=T)
         = T^2 * mean over rows of KL(softmax(teacher / T) || softmax(student / T))

Logits are (*lead, C); the rows are all leading positions (B for (B, C), B*S for
(B, S, V): DistilBERT's ``KLDivLoss(reduction="batchmean")`` on the flattened rows).
The result is a 0-dim tensor. Every number is compared with the float64
reference (``reference.distillation``) under the tolerance policy: the naive
yardstick is the same math in the input dtype.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.suites.bert.configs import distill_configs, wide_dtypes
from harness.suites.strategies import NO_SHRINK
from harness.suites.kit import ImplementationError, impl, on_target, run
from harness.boundary.target_ops import vjp
from harness.reference.distillation import cross_entropy_math, distillation_kl_div, distillation_math

PROPERTY_PREFIX = "distillation"
LOSS = "distillation_loss"
pytestmark = pytest.mark.needs(LOSS)
#: a one-hot teacher as finite logits: softmax gives exact zeros off the label in every dtype
ONE_HOT_GAP = 1e4


def call_loss(target, s, t, temperature=None):
    kw = {} if temperature is None else {"temperature": temperature}
    out = impl(target, LOSS)(s, t, **kw)
    if not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point:
        raise ImplementationError(f"{LOSS} returned {type(out).__name__}, expected a floating-point tensor")
    if out.dim() != 0:
        raise ImplementationError(f"{LOSS} returned shape {tuple(out.shape)}, expected a scalar (0-dim) tensor")
    return out


def distillation_truth(s, t, T):
    return distillation_math(s.cpu(), t.cpu(), T)


def distillation_naive(s, t, T):
    """The loss computed in the input dtype, two common ways; the yardstick is the one further
    from the float64 truth (a correct implementation may round like either)."""
    s, t = s.cpu(), t.cpu()
    return tolerance.worst_naive(distillation_truth(s, t, T), [distillation_math(s, t, T, compute_dtype=s.dtype),
                                                               distillation_kl_div(s, t, T, compute_dtype=s.dtype)])


def agree(out, s, t, T, what):
    return tolerance.assert_close(out, distillation_truth(s, t, T), distillation_naive(s, t, T),
                                  dtype=s.dtype, what=what)


def _allowed(s, t, T) -> float:
    nai = distillation_naive(s, t, T)
    return tolerance.allowance(distillation_truth(s, t, T), nai, dtype=s.dtype)


def _matches(out, ref, naive, dtype) -> bool:
    """``out`` equals ``ref`` under the policy, ``naive`` being the same quantity in the input dtype."""
    return tolerance.compare(out, ref, naive, dtype=dtype).ok


def check_agreement(target, cfg):
    """The loss equals the float64 T^2 * mean KL(teacher || student) of the reference within the tolerance
    policy (default temperature 1 when T = 1 is drawn); logits up to +-100 (confident teachers) must not
    give NaN/inf."""
    s, t = cfg.logits(target.device)
    T = cfg.temperature
    out = call_loss(target, s, t, None if T == 1.0 else T)
    agree(out, s, t, T, f"loss at T={T}{' (the default)' if T == 1.0 else ''}")


def check_nonnegative(target, cfg):
    """KL >= 0, = 0 when the student's distribution equals the teacher's (also for student =
    teacher + a per-row constant: the same softmax), and > 0 when they differ."""
    s, t = cfg.logits(target.device)
    T = cfg.temperature
    allowed = _allowed(s, t, T)
    out = float(call_loss(target, s, t, T))
    if out < -allowed:
        raise AssertionError(f"loss {out:.6g} < 0 (allowed rounding {allowed:.2e}): KL divergence is non-negative")
    shift = (torch.randn((*cfg.lead, 1), generator=cfg.generator(salt=3), dtype=torch.float64) * 5).to(t.device)
    for name, student in (("student = teacher", t.clone()),
                          ("student = teacher + a per-row constant", (t.double() + shift).to(t.dtype))):
        same = call_loss(target, student, t, T)
        zero = distillation_truth(student, t, T)  # 0 up to the rounding of the shifted logits
        # The naive loss of identical inputs is exactly 0 (the same rounding on both sides), so it
        # measures no error; an implementation that takes log(softmax) for one side and
        # log_softmax for the other rounds differently (C terms, times T^2). Its error budget is
        # that of the loss at this config (classes, T, dtype): the policy's allowance for (s, t).
        budget = max(allowed, tolerance.allowance(zero, distillation_naive(student, t, T), dtype=t.dtype))
        if not abs(float(same) - float(zero)) <= budget:  # NaN fails too
            raise AssertionError(f"{name}: loss {float(same):.6g}, expected {float(zero):.3g} (KL of a distribution "
                                 f"with itself is 0; a soft cross-entropy -sum p_T log p_S gives the teacher's "
                                 f"entropy {float(_entropy(t, T)):.6g} instead)")
    ref = float(distillation_truth(s, t, T))
    if ref > 10 * allowed and out <= allowed:
        raise AssertionError(f"loss {out:.6g} for different distributions; the reference is {ref:.6g} > 0")


def _entropy(t, T):
    lp = torch.log_softmax(t.double().cpu() / T, -1)
    return -(lp.exp() * lp).sum(-1).mean() * T * T


def check_direction(target, cfg):
    """KL(teacher || student), not KL(student || teacher): a peaked teacher and a flat student
    make the two differ by far more than the tolerance."""
    s, t = cfg.logits(target.device, teacher_sharpness=4.0)
    s = (s.double() * 0.1).to(s.dtype)  # flat student
    T = 1.0
    out = call_loss(target, s, t, T)
    fwd, rev = distillation_truth(s, t, T), distillation_truth(t, s, T)
    if _matches(out, fwd, distillation_naive(s, t, T), s.dtype):
        return
    if _matches(out, rev, distillation_naive(t, s, T), s.dtype):
        raise AssertionError(f"loss {float(out):.6g} is KL(student || teacher) = {float(rev):.6g}; the protocol is "
                             f"KL(teacher || student) = {float(fwd):.6g} (kl_div(log_softmax(student), "
                             f"softmax(teacher)): the teacher is the target distribution)")
    agree(out, s, t, T, f"loss for a peaked teacher (KL(T||S) = {float(fwd):.4g}, KL(S||T) = {float(rev):.4g})")


def check_temperature(target, cfg):
    """Both distributions are softened by T and the KL is multiplied by T^2: the loss matches the
    reference at T = 1 and at the drawn T, and its gradient w.r.t. the student logits,
    T (p_S - p_T) / rows, matches the reference's (its scale is then roughly independent of T)."""
    s, t = cfg.logits(target.device)
    for T in sorted({1.0, cfg.temperature}):
        out = call_loss(target, s, t, T)
        ref = distillation_truth(s, t, T)
        if T != 1.0 and not _matches(out, ref, distillation_naive(s, t, T), s.dtype):
            if _matches(out, ref / T ** 2, distillation_naive(s, t, T) / T ** 2, s.dtype):
                raise AssertionError(f"at T={T} the loss {float(out):.6g} is KL without the T^2 factor "
                                     f"(expected {float(ref):.6g}); its gradient shrinks like 1/T^2")
            plain_teacher = distillation_math(s.cpu().double() / T, t.cpu(), 1.0) * T ** 2
            plain_naive = distillation_math(s.cpu() / T, t.cpu(), 1.0, compute_dtype=s.dtype) * T ** 2
            if _matches(out, plain_teacher, plain_naive, s.dtype):
                raise AssertionError(f"at T={T} the loss {float(out):.6g} softens only the student: the teacher's "
                                     f"softmax lacks the temperature (expected {float(ref):.6g})")
        agree(out, s, t, T, f"loss at T={T}")
    T = cfg.temperature
    out, differentiable, (grad,) = on_target(target, vjp, target.lookup(LOSS), (s, t), {"temperature": T}, wrt=(0,))
    if not differentiable:
        raise AssertionError("the loss does not depend differentiably on the student logits (no grad_fn)")
    s64 = s.detach().cpu().double().requires_grad_(True)
    (ref_grad,) = torch.autograd.grad(distillation_math(s64, t.cpu(), T), s64)
    s_naive = s.detach().cpu().clone().requires_grad_(True)
    (naive_grad,) = torch.autograd.grad(distillation_math(s_naive, t.cpu(), T, compute_dtype=s.dtype), s_naive)
    tolerance.assert_close(grad, ref_grad, naive_grad, dtype=s.dtype,
                           what=f"gradient w.r.t. the student logits at T={T} (norm {float(grad.double().norm()):.4g}, "
                                f"reference {float(ref_grad.norm()):.4g})")


def check_reduction(target, cfg):
    """The loss is the mean over all leading positions: loss(x) = mean of the per-row losses, and
    a (B, S, V) input gives the same loss as its (B*S, V) flattening. Named alternatives:
    the sum, kl_div's batchmean on an unflattened (B, S, V) input (sum / B), reduction='mean'
    (also divides by C)."""
    s, t = cfg.logits(target.device)
    T = cfg.temperature
    out = call_loss(target, s, t, T)
    C = cfg.classes
    rows_s, rows_t = s.reshape(-1, C), t.reshape(-1, C)
    per_row = torch.stack([call_loss(target, rows_s[i:i + 1], rows_t[i:i + 1], T).double().cpu()
                           for i in range(cfg.rows)])
    mean = per_row.mean()
    allowed = 2 * _allowed(s, t, T)
    if abs(float(out) - float(mean)) > allowed:
        ratio = float(out) / float(mean) if float(mean) else float("nan")
        B = cfg.lead[0]
        named = {cfg.rows: "the sum over rows", cfg.rows / B: "the sum divided by the batch size B only "
                 "(kl_div reduction='batchmean' on an unflattened (B, S, V) input)", 1 / C: "the mean over every "
                 "element, /C too (kl_div reduction='mean')"}
        guess = next((v for k, v in named.items() if k != 1 and abs(ratio - k) <= 1e-3 * max(1, k)), None)
        raise AssertionError(f"loss over {cfg.rows} rows {tuple(s.shape)} = {float(out):.6g}, but the mean of the "
                             f"per-row losses is {float(mean):.6g} (ratio {ratio:.4g}"
                             f"{': ' + guess if guess else ''}); the protocol averages over all leading positions")
    if len(cfg.lead) > 1:
        flat = call_loss(target, rows_s, rows_t, T)
        if abs(float(flat) - float(out)) > allowed:
            raise AssertionError(f"a {tuple(s.shape)} input gives {float(out):.6g}, its ({cfg.rows}, {C}) flattening "
                                 f"{float(flat):.6g}: (B, S, V) must reduce over B*S rows")


def check_one_hot(target, cfg):
    """With a one-hot teacher at T = 1, KL(p_T || p_S) = CE - H(p_T) = CE = -log p_S(label)
    (the seed's statement); the teacher's zero probabilities contribute 0 (0 log 0 = 0), not NaN."""
    s, _ = cfg.logits(target.device)
    labels = torch.randint(cfg.classes, cfg.lead, generator=cfg.generator(salt=4))
    onehot = torch.nn.functional.one_hot(labels, cfg.classes).bool()
    t = torch.where(onehot, 0.0, -ONE_HOT_GAP).to(s.dtype).to(s.device)
    out = call_loss(target, s, t, 1.0)
    ref = cross_entropy_math(s.cpu(), labels)
    naive = cross_entropy_math(s.cpu(), labels, compute_dtype=s.dtype)
    tolerance.assert_close(out, ref, naive, dtype=s.dtype,
                           what="loss with a one-hot teacher (must equal the cross-entropy -log p_S(label))")


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs())
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs(dtypes=wide_dtypes()))
def test_nonnegative(target, cfg):
    run(target, check_nonnegative, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs(dtypes=wide_dtypes(), min_classes=3))
def test_direction(target, cfg):
    run(target, check_direction, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs(dtypes=wide_dtypes(), temperature=st.sampled_from([2.0, 4.0, 8.0, 0.5])))
def test_temperature(target, cfg):
    run(target, check_temperature, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs(dtypes=wide_dtypes(), min_rows=2, min_classes=2,
                           lead=st.one_of(st.tuples(st.integers(2, 6)),
                                          st.tuples(st.integers(1, 3), st.integers(2, 5)))))
def test_reduction(target, cfg):
    run(target, check_reduction, cfg)


@settings(phases=NO_SHRINK)
@given(cfg=distill_configs(temperature=st.just(1.0)))
def test_one_hot(target, cfg):
    run(target, check_one_hot, cfg)
