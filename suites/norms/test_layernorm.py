"""LayerNorm conformance (the seeds' 2.3; torch.nn.LayerNorm's contract).

    LayerNorm(x) = (x - mean) / sqrt(var + eps) * weight + bias

over the trailing ``normalized_shape`` dims of each token, with the *biased*
variance and eps inside the square root. The target's ``LayerNorm`` is
constructed like ``torch.nn.LayerNorm(normalized_shape, eps, elementwise_affine)``
and its ``.weight``/``.bias`` are set through the parameters.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given

from harness.suites import regimes
from harness.suites.regimes import covering
from harness.spec import tolerance
from harness.suites.kit import autocast_dtypes, run
from harness.suites.norms.configs import half_dtypes, norm_configs
from harness.reference.layernorm import layer_norm_math
from harness.suites.norms.helpers import (LN, agree, autocast_agree, build, check_token_dims, forward, matches, naive,
                                  submit_forward, token_stats, truth, unchanged)

PROPERTY_PREFIX = "layernorm"
pytestmark = pytest.mark.needs(LN)


def _identity(cfg, affine=None):
    """weight = 1, bias = 0 written explicitly when the module has them."""
    if not (cfg.affine if affine is None else affine):
        return {}
    return {"weight": torch.ones(cfg.normalized_shape, dtype=torch.float64),
            "bias": torch.zeros(cfg.normalized_shape, dtype=torch.float64)}


def _std(cfg) -> float:
    """A spread that makes eps small next to the variance (<= 4, so float16 math stays finite)."""
    return min(4.0, max(2.0 ** cfg.log2_scale, 16 * math.sqrt(cfg.eps)))


def check_standardized(target, cfg):
    """Before the affine part each token has mean 0 and biased variance 1 (exactly var/(var+eps))."""
    x = cfg.x(target.device, std=_std(cfg))
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **_identity(cfg))
    out = forward(target, mod, LN, x)
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    nd = len(cfg.normalized_shape)
    got, ref = token_stats(out, nd)[..., :2], token_stats(truth(layer_norm_math, x, **kw), nd)[..., :2]
    cmp = tolerance.compare(got, ref, token_stats(naive(layer_norm_math, x, **kw), nd)[..., :2], dtype=x.dtype)
    if not cmp.ok:
        n = cfg.features
        hint = ""
        var_ratio = float((got[..., 1] / ref[..., 1].clamp_min(1e-300)).mean())
        if n > 1 and abs(var_ratio - (n - 1) / n) < abs(var_ratio - 1) / 4:
            hint = f"; variance ratio {var_ratio:.4f} ~ (n-1)/n = {(n - 1) / n:.4f}: the unbiased variance was used"
        elif n == 1 and not bool(torch.isfinite(got).all()):
            hint = "; NaN for a one-element normalized_shape: 0/0 from n - 1 = 0, the unbiased variance was used"
        elif float(got[..., 0].abs().max()) > 0.5 * float(got[..., 1].max() ** 0.5):
            hint = "; the per-token mean is not 0: the mean is not subtracted"
        raise AssertionError(
            f"per-token (mean, biased variance) of the output is {got.reshape(-1, 2)[0].tolist()}, "
            f"expected {ref.reshape(-1, 2)[0].tolist()} (0, var/(var+eps)): {cmp.describe()}{hint}")


def check_shift_scale_invariance(target, cfg):
    """LN(a x + c) = LN(x) for a > 0 and any constant c, up to eps (and input rounding)."""
    std = _std(cfg)
    x = cfg.x(target.device, std=std)
    a, c = cfg.uniform(0.25, 4.0, salt=3), cfg.uniform(-4.0, 4.0, salt=4) * std
    x2 = (x.double() * a + c).to(x.dtype)
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **_identity(cfg))
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    unchanged(submit_forward(target, mod, LN, x2), submit_forward(target, mod, LN, x), x2, x, layer_norm_math,
              f"LayerNorm({a:.4g} x + {c:.4g}) vs LayerNorm(x)", **kw)


def check_eps_inside_sqrt(target, cfg):
    """[1, 0, 0, 0] with eps > 0 gives the textbook (x - 1/4) / sqrt(3/16 + eps); so does a one-hot
    row over the drawn normalized_shape: eps is added to the variance, inside the square root."""
    for eps in sorted({cfg.eps, 0.5}):
        x = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=cfg.torch_dtype, device=target.device)
        mod = build(target, LN, cfg, eps=eps, shape=4, weight=torch.ones(4, dtype=torch.float64),
                    bias=torch.zeros(4, dtype=torch.float64))
        out = forward(target, mod, LN, x)
        textbook = torch.tensor([[0.75, -0.25, -0.25, -0.25]], dtype=torch.float64) / math.sqrt(0.1875 + eps)
        outside = torch.tensor([[0.75, -0.25, -0.25, -0.25]], dtype=torch.float64) / (math.sqrt(0.1875) + eps)
        kw = dict(normalized_shape=(4,), eps=eps)
        cmp = tolerance.compare(out, textbook, naive(layer_norm_math, x, **kw), dtype=x.dtype)
        if not cmp.ok:
            hint = (" = (x - mean) / (sqrt(var) + eps): eps is outside the square root"
                    if tolerance.compare(out, outside, naive(layer_norm_math, x, **kw), dtype=x.dtype).ok else "")
            raise AssertionError(f"LayerNorm(4, eps={eps}) on [1, 0, 0, 0] gave {out.double().flatten().tolist()}, "
                                 f"textbook {textbook.flatten().tolist()}{hint}: {cmp.describe()}")
    g = cfg.generator(salt=6)
    x = torch.zeros(cfg.shape, dtype=cfg.torch_dtype)
    x.reshape(cfg.tokens, cfg.features)[:, int(torch.randint(0, cfg.features, (1,), generator=g))] = 1
    x = x.to(target.device)
    for eps in sorted({cfg.eps, 0.5}):
        mod = build(target, LN, cfg, eps=eps, affine=cfg.affine, **_identity(cfg))
        agree(submit_forward(target, mod, LN, x), x, layer_norm_math, f"one-hot rows with eps={eps}",
              normalized_shape=cfg.normalized_shape, eps=eps)


def check_eps_honoured(target, cfg):
    """The eps passed to the constructor is the one used: inputs whose variance is about eps."""
    u = cfg.uniform(0.25, 4.0, salt=3)
    x = cfg.x(target.device, std=math.sqrt(cfg.eps * u))
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **_identity(cfg))
    out = forward(target, mod, LN, x)
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    if not matches(out, x, layer_norm_math, wide=True, **kw):
        used = [e for e in (1e-5, 1e-6, 1e-12, 0.0) if e != cfg.eps
                and matches(out, x, layer_norm_math, wide=True, normalized_shape=cfg.normalized_shape, eps=e)]
        hint = f" (the output matches eps={used[0]:g}: the constructor's eps is ignored)" if used else ""
        agree(out, x, layer_norm_math, f"with eps={cfg.eps:g} and a variance about eps{hint}", wide=True, **kw)


def check_affine(target, cfg):
    """Random weight and bias set through .weight/.bias are applied: y = x_hat * weight + bias."""
    x = cfg.x(target.device)
    w, b = cfg.params()
    mod = build(target, LN, cfg, eps=cfg.eps, affine=True, weight=w, bias=b)
    out = forward(target, mod, LN, x)
    kw = dict(normalized_shape=cfg.normalized_shape, eps=cfg.eps)
    if not matches(out, x, layer_norm_math, weight=w, bias=b, **kw):
        hint = ""
        if matches(out, x, layer_norm_math, weight=w, **kw):
            hint = " (the output matches x_hat * weight: the bias is ignored)"
        elif matches(out, x, layer_norm_math, bias=b, **kw):
            hint = " (the output matches x_hat + bias: the weight is ignored)"
        elif matches(out, x, layer_norm_math, **kw):
            hint = " (the output matches x_hat: weight and bias are ignored)"
        agree(out, x, layer_norm_math, f"with random weight and bias{hint}", weight=w, bias=b, **kw)


def check_large_values(target, cfg):
    """float16/bfloat16 inputs around 1e4 with spread in the thousands match the float32 math:
    (x - mean)^2 overflows float16 (max 65504), so the statistics must be computed wider."""
    spread, offset = cfg.uniform(300.0, 3000.0, salt=3), cfg.uniform(-1e4, 1e4, salt=4)
    z = torch.randn(cfg.shape, generator=cfg.generator(salt=5), dtype=torch.float64).clamp(-4, 4)
    x = (offset + spread * z).clamp(-6e4, 6e4).to(cfg.torch_dtype).to(target.device)
    w, b = cfg.params()
    params = {"weight": w, "bias": b} if cfg.affine else {}
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **params)
    agree(submit_forward(target, mod, LN, x), x, layer_norm_math,
          f"{cfg.dtype} inputs |x| up to {float(x.double().abs().max()):.0f} (vs float32 math)", wide=True,
          normalized_shape=cfg.normalized_shape, eps=cfg.eps, **params)


def check_normalized_dims(target, cfg):
    """Statistics over the trailing normalized_shape only: another token's values change nothing
    here (unlike batch norm), and every element of the token takes part."""
    w, b = cfg.params()
    params = {"weight": w, "bias": b} if cfg.affine else {}
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **params)
    check_token_dims(target, LN, cfg, mod, layer_norm_math, normalized_shape=cfg.normalized_shape,
                     eps=cfg.eps, **params)


def check_autocast(target, cfg):
    """float32 x (offset by 32 std, which a mean formed in half precision cannot survive) and a float32
    LayerNorm called inside torch.autocast(dtype = the config's half dtype): the output keeps the precision
    autocast keeps for norms (float32 output: the float32 tolerance; a mean formed by a matmul is autocast
    to bfloat16)."""
    std = _std(cfg)
    x = cfg.x(target.device, std=std).float() + 32 * std
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, dtype=torch.float32, **_identity(cfg))
    autocast_agree(target, LN, mod, x, cfg.dtype, layer_norm_math, normalized_shape=cfg.normalized_shape,
                   eps=cfg.eps)


@given(cfg=norm_configs())
@covering(regimes.NORMS)
def test_standardized(target, cfg):
    run(target, check_standardized, cfg)


@given(cfg=norm_configs(min_features=2))
def test_shift_scale_invariance(target, cfg):
    run(target, check_shift_scale_invariance, cfg)


@given(cfg=norm_configs())
@covering(regimes.NORMS)
def test_eps_inside_sqrt(target, cfg):
    run(target, check_eps_inside_sqrt, cfg)


@given(cfg=norm_configs(min_features=2))
@covering(regimes.FLOAT64_NORMS)
def test_eps_honoured(target, cfg):
    run(target, check_eps_honoured, cfg)


@given(cfg=norm_configs())
@covering(regimes.NORMS)
def test_affine(target, cfg):
    run(target, check_affine, cfg)


@given(cfg=norm_configs(dtypes=half_dtypes(), min_features=2))
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
