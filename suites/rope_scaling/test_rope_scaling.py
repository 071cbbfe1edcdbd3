"""Scaled RoPE: the frequencies of every context-extension rule (``rope_frequencies``).

    rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None) -> (inv_freq (dim/2,), attention_factor)

The rules and their formulas: ``reference/rope_scaling.py``. Frequencies span orders of magnitude
(base^-1 .. 1) and the low ones are where the rules act, so they are compared as log-frequencies
(a relative error) under the tolerance policy, in the dtype the target returns; the attention
factor as a number. Each rule's own property checks it against the target's own plain frequencies
(``scaling=None``) -- an invariant, so a target that rounds its plain frequencies its own way is
held to itself -- and ``rope_scaling.agreement`` holds every rule to the float64 formulas.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import example, given

from harness.spec import tolerance
from harness.reference.rope_scaling import (dynamic_base, llama3_bands, longrope_attention_factor,
                                            plain_frequencies, rope_frequencies, yarn_mscale, yarn_ramp,
                                            yarn_range)
from harness.suites.kit import ImplementationError, impl, run
from harness.suites.rope_scaling.configs import RopeScalingConfig, at_factor_one, scaling_configs, whole

PROPERTY_PREFIX = "rope_scaling"
NAME = "rope_frequencies"
pytestmark = pytest.mark.needs(NAME)

_BASE = dict(dim=128, base=500000.0, seq_len=0, low_freq_factor=1.0, high_freq_factor=4.0, beta_fast=32.0,
             beta_slow=1.0, mscale=0.0, mscale_all_dim=0.0, attention_factor=0.0, truncate=True, max_pos=0, seed=1)
#: the published configurations, run first on every profile: Llama 3.1, a Qwen/DeepSeek-style YaRN (with
#: a model config whose max_position_embeddings is not factor x original), Phi-3's LongRoPE exactly at the
#: original length and one past it, dynamic NTK one past the original length
LLAMA31 = RopeScalingConfig(rule="llama3", factor=8.0, orig=8192, **_BASE)
YARN = RopeScalingConfig(rule="yarn", factor=40.0, orig=4096, **{**_BASE, "dim": 64, "base": 10000.0,
                                                                   "mscale": 1.0, "mscale_all_dim": 1.0,
                                                                   "max_pos": 163840 + 1})
YARN_PLAIN = dataclasses.replace(YARN, factor=4.0, mscale=0.0, mscale_all_dim=0.0, max_pos=0, truncate=False)
PHI3 = RopeScalingConfig(rule="longrope", factor=32.0, orig=4096, **{**_BASE, "dim": 96, "base": 10000.0,
                                                                     "seq_len": 4096})
PHI3_LONG = dataclasses.replace(PHI3, seq_len=4097)
DYNAMIC = RopeScalingConfig(rule="dynamic", factor=2.0, orig=2048, **{**_BASE, "dim": 64, "base": 10000.0,
                                                                      "seq_len": 6000})


def frequencies(target, cfg: RopeScalingConfig, scaled: bool = True) -> tuple[torch.Tensor, float, str]:
    """(inv_freq on the CPU, attention_factor, the call's text); ``scaled=False``: plain RoPE over the
    rotary dim (``dim`` = ``cfg.rotary_dim``, no scaling)."""
    dim = cfg.dim if scaled else cfg.rotary_dim
    scaling, seq_len = (cfg.scaling(), cfg.call_seq_len()) if scaled else (None, None)
    text = f"{NAME}(dim={dim}, base={cfg.base:g}, scaling={scaling}, seq_len={seq_len})"
    out = impl(target, NAME)(dim, cfg.base, scaling, seq_len)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ImplementationError(f"{text} returned {type(out).__name__}; expected (inv_freq, attention_factor)")
    inv, factor = out
    pairs = cfg.rotary_dim // 2
    if not isinstance(inv, torch.Tensor) or tuple(inv.shape) != (pairs,) or not inv.dtype.is_floating_point:
        raise ImplementationError(f"{text} returned inv_freq {getattr(inv, 'shape', inv)!r}; expected a float "
                                  f"tensor of shape ({pairs},) (the rotary dim {cfg.rotary_dim} / 2)")
    factor = float(factor.item() if isinstance(factor, torch.Tensor) else factor)
    return inv.detach().cpu(), factor, text


def assert_frequencies(got: torch.Tensor, expected: torch.Tensor, what: str, text: str) -> None:
    """``got`` (the target's dtype) against float64 ``expected``, as log-frequencies under the policy."""
    dtype = got.dtype
    if not (got > 0).all() or not torch.isfinite(got).all():
        i = int((~((got > 0) & torch.isfinite(got))).nonzero()[0])
        raise AssertionError(f"{what}: pair {i} has frequency {float(got[i]):.6g} (must be finite and > 0)\n"
                             f"  call: {text}")
    naive = expected.to(dtype).to(torch.float64).log()
    try:
        tolerance.assert_close(got.to(torch.float64).log(), expected.log(), naive, dtype=dtype,
                               what=f"{what} (log-frequencies)")
    except AssertionError as exc:
        i = int(((got.double() - expected).abs() / expected).argmax())
        raise AssertionError(f"{exc}\n  pair {i}: {float(got[i]):.8g}, expected {float(expected[i]):.8g} "
                             f"(ratio {float(got[i] / expected[i]):.6g})\n  call: {text}") from None


def assert_factor(got: float, expected: float, what: str, text: str) -> None:
    if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=0.0):
        raise AssertionError(f"{what}: attention_factor {got:.8g}, expected {expected:.8g}\n  call: {text}")


def check_agreement(target, cfg):
    """Every rule (linear, dynamic, yarn, llama3, longrope) with drawn parameters, sequence lengths on
    both sides of the original length and model configs whose maximum is not factor x original:
    the frequencies and the attention factor equal the float64 formulas
    (``reference/rope_scaling.py``; log-frequencies under the tolerance policy)."""
    inv, factor, text = frequencies(target, cfg)
    ref, ref_factor = rope_frequencies(cfg.dim, cfg.base, cfg.scaling(), cfg.call_seq_len())
    assert_frequencies(inv, ref, f"{cfg.rule} frequencies", text)
    assert_factor(factor, ref_factor, f"{cfg.rule} attention factor", text)


def check_identity(target, cfg):
    """At factor 1 (LongRoPE: every per-pair factor 1) every rule is plain RoPE -- at any sequence
    length, except dynamic NTK past the original length, whose base grows with L / orig even at
    factor 1 -- the same frequencies as the target's own ``scaling=None`` and attention factor 1
    (YaRN's mscale ratio included)."""
    one = at_factor_one(cfg)
    if one.rule == "dynamic" and one.seq_len > one.orig:
        one = dataclasses.replace(one, seq_len=one.orig)
    inv, factor, text = frequencies(target, one)
    plain, _, _ = frequencies(target, one, scaled=False)
    assert_frequencies(inv, plain.double(), f"{cfg.rule} at factor 1 vs plain RoPE", text)
    assert_factor(factor, 1.0, f"{cfg.rule} at factor 1", text)


def check_plain(target, cfg):
    """``scaling=None`` is plain RoPE: frequencies base^(-2i/dim) and attention factor 1."""
    inv, factor, text = frequencies(target, cfg, scaled=False)
    assert_frequencies(inv, plain_frequencies(cfg.rotary_dim, cfg.base), "plain frequencies", text)
    assert_factor(factor, 1.0, "plain RoPE", text)


def check_linear(target, cfg):
    """Linear (position interpolation): the plain frequencies divided by ``factor`` (positions / factor),
    attention factor 1."""
    inv, factor, text = frequencies(target, cfg)
    plain, _, _ = frequencies(target, cfg, scaled=False)
    assert_frequencies(inv, plain.double() / cfg.factor, f"linear scaling by {cfg.factor:g}", text)
    assert_factor(factor, 1.0, "linear scaling", text)


def check_dynamic(target, cfg):
    """Dynamic NTK: plain RoPE up to the original length (or without seq_len); past it, plain RoPE with
    the base grown to base (factor L / orig - (factor - 1))^(dim / (dim - 2)) for that length L; the
    rule has no memory (a short call after a long one is plain again: ``history.rope_frequencies``)."""
    inv, factor, text = frequencies(target, cfg)
    L = cfg.call_seq_len()
    if L is None or L <= cfg.orig:
        plain, _, _ = frequencies(target, cfg, scaled=False)
        assert_frequencies(inv, plain.double(), f"dynamic at seq_len {L} <= original {cfg.orig}", text)
    else:
        grown = dynamic_base(cfg.rotary_dim, cfg.base, cfg.factor, cfg.orig, L)
        assert_frequencies(inv, plain_frequencies(cfg.rotary_dim, grown), f"dynamic at seq_len {L} (base {grown:.6g})",
                           text)
    assert_factor(factor, 1.0, "dynamic NTK", text)


def check_llama3_bands(target, cfg):
    """Llama 3: pairs whose wavelength 2 pi / f is below orig / high_freq_factor keep the plain
    frequency, those above orig / low_freq_factor are divided by factor, and in between the ratio to
    plain lies in [1 / factor, 1] and grows with the frequency (continuous at both edges: the smooth
    formula there)."""
    inv, factor, text = frequencies(target, cfg)
    plain, _, _ = frequencies(target, cfg, scaled=False)
    ref, _ = rope_frequencies(cfg.dim, cfg.base, cfg.scaling())
    wavelen, low_edge, high_edge = llama3_bands(cfg.rotary_dim, cfg.base, cfg.scaling())
    high, low = wavelen < high_edge, wavelen > low_edge
    plain = plain.double()
    assert_frequencies(inv[high], plain[high], "llama3's high-frequency band (kept)", text)
    assert_frequencies(inv[low], plain[low] / cfg.factor, f"llama3's low-frequency band (/ {cfg.factor:g})", text)
    medium = ~high & ~low
    assert_frequencies(inv[medium], ref[medium], "llama3's smooth band", text)
    ratio = (inv.double() / plain)[medium]
    if ratio.numel() > 1 and not (ratio[1:] <= ratio[:-1] * (1 + 1e-5)).all():
        raise AssertionError(f"llama3's smooth band: the ratio to plain RoPE is not monotone in the "
                             f"wavelength: {ratio.tolist()[:8]}\n  call: {text}")
    assert_factor(factor, 1.0, "llama3", text)


def check_yarn(target, cfg):
    """YaRN: pairs below the ramp's start (``beta_fast`` rotations over the original length) keep the
    plain frequency, pairs past its end (``beta_slow``) are divided by factor, between them a linear
    blend; the attention factor is the explicit one, or mscale(factor, mscale) / mscale(factor,
    mscale_all_dim), or 0.1 ln(factor) + 1, never left out."""
    inv, factor, text = frequencies(target, cfg)
    plain, _, _ = frequencies(target, cfg, scaled=False)
    s = cfg.scaling()
    low, high = yarn_range(cfg.rotary_dim, cfg.base, cfg.orig, cfg.beta_fast, cfg.beta_slow, cfg.truncate)
    ramp = yarn_ramp(cfg.rotary_dim, low, high)
    plain = plain.double()
    kept, divided = ramp == 0, ramp == 1
    assert_frequencies(inv[kept], plain[kept], f"yarn's extrapolated pairs (i <= {low:g})", text)
    assert_frequencies(inv[divided], plain[divided] / cfg.factor,
                       f"yarn's interpolated pairs (i >= {high:g}, / {cfg.factor:g})", text)
    ref, ref_factor = rope_frequencies(cfg.dim, cfg.base, s)
    assert_frequencies(inv, ref, "yarn's ramp", text)
    if cfg.attention_factor:
        why = "the explicit attention_factor"
    elif cfg.mscale and cfg.mscale_all_dim:
        why = f"mscale({cfg.factor:g}, {cfg.mscale:g}) / mscale({cfg.factor:g}, {cfg.mscale_all_dim:g})"
    else:
        why = f"0.1 ln({cfg.factor:g}) + 1 = {yarn_mscale(cfg.factor):.6g}"
    assert_factor(factor, ref_factor, f"yarn attention factor ({why})", text)


def check_longrope(target, cfg):
    """LongRoPE: the plain frequencies divided by the short factors up to the original length (or
    without seq_len) and by the long factors past it (the switch at seq_len > original, not >=); the
    attention factor is the explicit one or sqrt(1 + ln(factor) / ln(original))."""
    inv, factor, text = frequencies(target, cfg)
    plain, _, _ = frequencies(target, cfg, scaled=False)
    L = cfg.call_seq_len()
    long = L is not None and L > cfg.orig
    ext = torch.tensor(cfg.ext_factors(1 if long else 0), dtype=torch.float64)
    which = f"long factors (seq_len {L} > {cfg.orig})" if long else f"short factors (seq_len {L} <= {cfg.orig})"
    assert_frequencies(inv, plain.double() / ext, f"longrope with its {which}", text)
    expected = cfg.attention_factor or longrope_attention_factor(cfg.factor, cfg.orig)
    assert_factor(factor, expected, "longrope attention factor", text)


def check_partial(target, cfg):
    """A partial rotary factor p (``scaling["partial_rotary_factor"]``, any rule) rotates int(dim p) dims:
    the frequencies and attention factor equal the same call over a head dim of int(dim p) without
    the factor -- the exponent is 2i / (dim p), not 2i / dim -- and there are int(dim p) / 2 of them."""
    inv, factor, text = frequencies(target, cfg)
    same, same_factor, same_text = frequencies(target, whole(cfg))
    assert_frequencies(inv, same.double(), f"{cfg.rule} with partial_rotary_factor {cfg.partial:g} vs the same "
                       f"rule over {cfg.rotary_dim} dims ({same_text})", text)
    assert_factor(factor, same_factor, f"{cfg.rule} with partial_rotary_factor {cfg.partial:g}", text)


def check_ordered(target, cfg):
    """For every rule the frequencies are finite, positive and strictly decreasing from pair 0 (the
    fastest) to the last, and the attention factor is finite and positive."""
    inv, factor, text = frequencies(target, cfg)
    inv = inv.double()
    if not (torch.isfinite(inv).all() and (inv > 0).all()):
        raise AssertionError(f"{cfg.rule}: frequencies not finite and positive: {inv.tolist()[:8]}\n  call: {text}")
    if inv.numel() > 1 and not (inv[1:] < inv[:-1]).all():
        i = int((inv[1:] >= inv[:-1]).nonzero()[0])
        raise AssertionError(f"{cfg.rule}: frequencies not decreasing: pair {i + 1} has {float(inv[i + 1]):.6g} "
                             f">= pair {i}'s {float(inv[i]):.6g}\n  call: {text}")
    if not (math.isfinite(factor) and factor > 0):
        raise AssertionError(f"{cfg.rule}: attention factor {factor!r} (must be finite and positive)\n  call: {text}")


@example(cfg=YARN)
@example(cfg=PHI3_LONG)
@example(cfg=LLAMA31)
@given(cfg=scaling_configs())
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@example(cfg=YARN)
@example(cfg=DYNAMIC)
@given(cfg=scaling_configs())
def test_identity(target, cfg):
    run(target, check_identity, cfg)


@example(cfg=LLAMA31)
@given(cfg=scaling_configs())
def test_plain(target, cfg):
    run(target, check_plain, cfg)


@given(cfg=scaling_configs(rules=("linear",)))
def test_linear(target, cfg):
    run(target, check_linear, cfg)


@example(cfg=DYNAMIC)
@example(cfg=dataclasses.replace(DYNAMIC, seq_len=2048))
@given(cfg=scaling_configs(rules=("dynamic",)))
def test_dynamic(target, cfg):
    run(target, check_dynamic, cfg)


@example(cfg=LLAMA31)
@given(cfg=scaling_configs(rules=("llama3",)))
def test_llama3_bands(target, cfg):
    run(target, check_llama3_bands, cfg)


@example(cfg=YARN)
@example(cfg=YARN_PLAIN)
@given(cfg=scaling_configs(rules=("yarn",)))
def test_yarn(target, cfg):
    run(target, check_yarn, cfg)


@example(cfg=PHI3)
@example(cfg=PHI3_LONG)
@given(cfg=scaling_configs(rules=("longrope",)))
def test_longrope(target, cfg):
    run(target, check_longrope, cfg)


@example(cfg=dataclasses.replace(YARN_PLAIN, partial=0.5))
@given(cfg=scaling_configs(partial=True))
def test_partial(target, cfg):
    run(target, check_partial, cfg)


@example(cfg=LLAMA31)
@given(cfg=scaling_configs())
def test_ordered(target, cfg):
    run(target, check_ordered, cfg)
