"""RMSNorm conformance (the seeds' 2.3; torch.nn.RMSNorm's contract).

    RMSNorm(x) = x / sqrt(mean(x^2) + eps) * weight

over the trailing ``normalized_shape`` dims of each token: no mean subtraction,
no bias. The target's ``RMSNorm`` is constructed like
``torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True)``.
Two legitimate differences are measured and named: ``rmsnorm_eps`` (eps=None
means torch.finfo(dtype).eps as torch, or a fixed default such as Llama's 1e-6)
and ``rmsnorm_scale`` (x * weight, or Gemma's x * (1 + weight)).
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given

from harness.suites import regimes
from harness.suites.regimes import covering
from harness.suites.kit import KNOWN, autocast_dtypes, check_convention, record_label, run
from harness.suites.norms.configs import half_dtypes, norm_configs
from harness.reference.layernorm import layer_norm_math
from harness.reference.rmsnorm import default_eps, rms_norm_math
from harness.suites.norms.helpers import (RMS, agree, autocast_agree, build, check_token_dims, forward, matches, submit_forward,
                                  unchanged)

PROPERTY_PREFIX = "rmsnorm"
pytestmark = pytest.mark.needs(RMS)
#: fixed defaults in the wild: Llama, T5, Gemma (1e-6), Mistral configs (1e-5)
FIXED_EPS = (1e-6, 1e-5)


def _declared(target, key: str) -> str:
    return target.conventions.get(key, KNOWN[key].default)


def build_rms(target, cfg, eps, gamma=None, affine=None, **kw):
    """The target's RMSNorm with effective scale ``gamma`` (float64, *normalized_shape; default 1),
    written as the declared ``rmsnorm_scale`` says: weight = gamma, or weight = gamma - 1 (Gemma).
    Returns (module, effective gamma after rounding to the dtype, or None without affine)."""
    affine = cfg.affine if affine is None else affine
    if not affine:
        return build(target, RMS, cfg, eps=eps, affine=False, **kw), None
    dtype = kw.get("dtype") or cfg.torch_dtype
    gamma = torch.ones(cfg.normalized_shape, dtype=torch.float64) if gamma is None else gamma
    if _declared(target, "rmsnorm_scale") == "one_plus_weight":
        weight = (gamma - 1).to(dtype).double()
        effective = 1 + weight
    else:
        weight = effective = gamma.to(dtype).double()
    return build(target, RMS, cfg, eps=eps, affine=True, weight=weight, **kw), effective


def _std(cfg) -> float:
    """A spread that makes eps small next to the mean square (<= 4, so float16 math stays finite)."""
    return min(4.0, max(2.0 ** cfg.log2_scale, 16 * math.sqrt(cfg.eps)))


def check_autocast(target, cfg):
    """float32 x and a float32 RMSNorm called inside torch.autocast(dtype = the config's half dtype): the
    output keeps the precision autocast keeps for norms (float32 output: the float32 tolerance; a mean
    square formed by a row-wise matmul or einsum is autocast to half precision and off by ~2^-9)."""
    x = cfg.x(target.device, std=_std(cfg)).float()
    mod, gamma = build_rms(target, cfg, cfg.eps, dtype=torch.float32)
    autocast_agree(target, RMS, mod, x, cfg.dtype, rms_norm_math, normalized_shape=cfg.normalized_shape,
                   weight=gamma, eps=cfg.eps)


def check_scale_invariance(target, cfg):
    """RMSNorm(a x) = RMSNorm(x) for a > 0, up to eps (and input rounding)."""
    x = cfg.x(target.device, std=_std(cfg))
    a = cfg.uniform(0.25, 4.0, salt=3)
    x2 = (x.double() * a).to(x.dtype)
    mod, gamma = build_rms(target, cfg, cfg.eps, cfg.params()[0])
    unchanged(submit_forward(target, mod, RMS, x2), submit_forward(target, mod, RMS, x), x2, x, rms_norm_math,
              f"RMSNorm({a:.4g} x) vs RMSNorm(x)", normalized_shape=cfg.normalized_shape,
              weight=gamma, eps=cfg.eps)


def check_no_mean_subtraction(target, cfg):
    """A shifted input x + c changes the output exactly as the reference says: the mean is not
    subtracted (that would be LayerNorm without bias)."""
    std = _std(cfg)
    x = cfg.x(target.device, std=std)
    c = cfg.uniform(1.0, 3.0, salt=3) * std * (1 if cfg.seed % 2 else -1)
    x2 = (x.double() + c).to(x.dtype)
    mod, gamma = build_rms(target, cfg, cfg.eps, cfg.params()[0])
    out2 = forward(target, mod, RMS, x2)
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    if not matches(out2, x2, rms_norm_math, weight=gamma, **kw):
        hint = (" (the output matches (x - mean) / sqrt(var + eps) * weight: the mean was subtracted)"
                if matches(out2, x2, layer_norm_math, weight=gamma, **kw) else "")
        agree(out2, x2, rms_norm_math, f"for x + {c:.4g}{hint}", weight=gamma, **kw)


def measure_eps(target, cfg) -> tuple[str | None, str]:
    """eps=None: which eps the module uses, from inputs whose mean square lies between the
    candidates (geometric mean of finfo(float32 or float64).eps and 1e-6), where they give
    distinct outputs. finfo: of the compute dtype (torch >= 2.6: float32 for half inputs)
    or of the input dtype (older torch, the docs); fixed: Llama/T5/Gemma's 1e-6, or 1e-5."""
    dt = cfg.torch_dtype
    finfo = sorted({default_eps(dt), torch.finfo(dt).eps})
    ms = math.sqrt(default_eps(dt) * 1e-6)
    z = torch.randn(cfg.shape, generator=cfg.generator(salt=8), dtype=torch.float64)
    z = z / z.reshape(cfg.tokens, -1).pow(2).mean(-1).sqrt().reshape(*cfg.lead, *[1] * len(cfg.normalized_shape))
    x = (z * math.sqrt(ms)).to(dt).to(target.device)
    mod, gamma = build_rms(target, cfg, None)
    out = forward(target, mod, RMS, x)
    kw = dict(normalized_shape=cfg.normalized_shape, weight=gamma, wide=True)
    found = [("finfo", e) for e in finfo if matches(out, x, rms_norm_math, eps=e, **kw)]
    found += [("fixed", e) for e in FIXED_EPS if matches(out, x, rms_norm_math, eps=e, **kw)]
    kinds = {k for k, _ in found}
    ms_x = x.double().cpu().reshape(cfg.tokens, -1).pow(2).mean(-1)
    ms_out = (out.double().cpu().reshape(cfg.tokens, -1) / (gamma.reshape(-1) if gamma is not None else 1))
    eps_hat = float((ms_x * (1 / ms_out.pow(2).mean(-1) - 1)).median())
    evidence = (f"\n  eps=None, {cfg.dtype} input with mean square {float(ms_x.mean()):.3g}: the output "
                f"implies eps ~ {eps_hat:.3g}; finfo candidates {', '.join(f'{e:.3g}' for e in finfo)}"
                + (f"; matches eps={', '.join(f'{e:.3g}' for _, e in found)}" if found else ""))
    return (kinds.pop() if len(kinds) == 1 else None), evidence


def check_eps(target, cfg):
    """eps=None follows a named convention (torch: finfo(dtype).eps, float32's for half inputs;
    Llama/T5: a fixed 1e-6), measured from the output; an explicit eps is honoured (inputs
    whose mean square is about eps)."""
    measured, evidence = measure_eps(target, cfg)
    label = check_convention("rmsnorm_eps", measured, target.conventions, evidence)
    u = cfg.uniform(0.25, 4.0, salt=3)
    x = cfg.x(target.device, std=math.sqrt(cfg.eps * u))
    mod, gamma = build_rms(target, cfg, cfg.eps)
    agree(submit_forward(target, mod, RMS, x), x, rms_norm_math, f"with eps={cfg.eps:g} and a mean square about eps",
          wide=True, normalized_shape=cfg.normalized_shape, weight=gamma, eps=cfg.eps)
    record_label(target, label)


def check_weight(target, cfg):
    """A random weight set through .weight scales the output: x_hat * weight (torch, Llama) or
    x_hat * (1 + weight) (Gemma), measured and named; elementwise_affine=False means no scale."""
    x = cfg.x(target.device)
    p = (cfg.params()[0] * 2 - 2).to(cfg.torch_dtype).double()  # in [-1.5, 1.5]: weight and 1 + weight differ
    mod = build(target, RMS, cfg, eps=cfg.eps, affine=True, weight=p)
    out = forward(target, mod, RMS, x)
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    found = [name for name, g in (("weight", p), ("one_plus_weight", 1 + p))
             if matches(out, x, rms_norm_math, weight=g, **kw)]
    measured = found[0] if len(found) == 1 else None
    evidence = ""
    if measured is None:
        ignored = matches(out, x, rms_norm_math, **kw)
        evidence = (f"\n  weight set to {p.flatten()[:4].tolist()}...; output {out.double().flatten()[:4].tolist()}, "
                    f"x_hat * weight {rms_norm_math(x.cpu(), weight=p, **kw).flatten()[:4].tolist()}"
                    + ("\n  the output matches x_hat: the weight is ignored" if ignored else ""))
    label = check_convention("rmsnorm_scale", measured, target.conventions, evidence)
    plain = build(target, RMS, cfg, eps=cfg.eps, affine=False)
    agree(submit_forward(target, plain, RMS, x), x, rms_norm_math, "with elementwise_affine=False", **kw)
    record_label(target, label)


def check_large_values(target, cfg):
    """float16/bfloat16 inputs with 300 <= |x| <= 18000 match the float32 math: x^2 overflows
    float16 above 256 (max 65504), so the mean square must be computed wider."""
    g = cfg.generator(salt=3)
    mag = 300.0 * torch.exp(torch.rand(cfg.shape, generator=g, dtype=torch.float64) * math.log(60.0))
    sign = torch.randint(0, 2, cfg.shape, generator=g).double() * 2 - 1
    x = (sign * mag).to(cfg.torch_dtype).to(target.device)
    mod, gamma = build_rms(target, cfg, cfg.eps, cfg.params()[0])
    agree(submit_forward(target, mod, RMS, x), x, rms_norm_math, f"{cfg.dtype} inputs with |x| >= 300 (vs float32 math)",
          wide=True, normalized_shape=cfg.normalized_shape, weight=gamma, eps=cfg.eps)


def check_normalized_dims(target, cfg):
    """The mean square is over the trailing normalized_shape only: another token's values change
    nothing here, and every element of the token takes part."""
    mod, gamma = build_rms(target, cfg, cfg.eps, cfg.params()[0])
    check_token_dims(target, RMS, cfg, mod, rms_norm_math, normalized_shape=cfg.normalized_shape,
                     weight=gamma, eps=cfg.eps)


@given(cfg=norm_configs())
@covering(regimes.NORMS)
def test_scale_invariance(target, cfg):
    run(target, check_scale_invariance, cfg)


@given(cfg=norm_configs())
def test_no_mean_subtraction(target, cfg):
    run(target, check_no_mean_subtraction, cfg)


@given(cfg=norm_configs())
@covering(regimes.FLOAT64_NORMS + regimes.NORMS)
def test_eps(target, cfg):
    run(target, check_eps, cfg)


@given(cfg=norm_configs())
@covering(regimes.NORMS)
def test_weight(target, cfg):
    run(target, check_weight, cfg)


@given(cfg=norm_configs(dtypes=half_dtypes()))
def test_large_values(target, cfg):
    run(target, check_large_values, cfg)


@given(cfg=norm_configs(min_tokens=2, min_features=2))
def test_normalized_dims(target, cfg):
    run(target, check_normalized_dims, cfg)


@pytest.mark.uses("autocast")
@given(cfg=norm_configs(dtypes=autocast_dtypes()))
@covering(regimes.NORMS_AUTOCAST)
def test_autocast(target, cfg):
    run(target, check_autocast, cfg)
