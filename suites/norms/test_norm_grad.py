"""LayerNorm / RMSNorm backward conformance: dx (*lead, *normalized_shape), dweight and dbias
(*normalized_shape).

    LayerNorm: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),  gw = g * weight
    RMSNorm:   dx = rstd * (gw - x * rstd^2 * mean(gw * x))
    dweight = sum over tokens of g * xhat (RMSNorm: g * x * rstd),  dbias = sum over tokens of g

The target's module is built like torch.nn (``suites.norms.helpers.build``), random weight and bias are
written into it, and its forward and backward run in its worker with a random upstream gradient
g; every gradient is compared with float64 autograd of ``reference.layernorm`` /
``reference.rmsnorm`` under the policy (``K_GRAD`` x autograd of the same math in the input
dtype + floor). eps is always passed explicitly, so the rmsnorm_eps convention does not enter.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given

from harness import regimes, tolerance
from suites.norms.configs import norm_configs
from harness.regimes import covering
from harness.runner import run
from reference.layernorm import layer_norm_math
from reference.rmsnorm import rms_norm_math
from suites._grad import assert_grads, autograd_of, target_grads, upstream
from suites.norms.helpers import LN, RMS, build, naive_dtype
from suites.norms.test_rmsnorm import _rms

FAMILY = "norm_grad"
pytestmark = pytest.mark.uses("backward")


def module_grads(target, mod, cfg, x, g, params: tuple[str, ...]):
    """[dx, d(each of params)] of the target's module."""
    _, (dx,), pg = target_grads(target, mod, (x,), {}, (0,), g, module=mod, params=params)
    return [dx] + [torch.zeros(cfg.normalized_shape) if pg[p] is None else pg[p] for p in params]


def truth_and_naive(math, x, g, params: list[torch.Tensor], **kw):
    """float64 autograd of ``math`` w.r.t. (x, *params), and autograd of the same math in the
    input dtype (parameters rounded to it)."""
    def f(dtype):
        return lambda x, *p: math(x, *p, compute_dtype=dtype, **kw)
    truth = autograd_of(f(torch.float64), [x.double(), *params], g.double())
    naive = autograd_of(f(naive_dtype(x.dtype)), [x, *(p.to(x.dtype) for p in params)], g)
    return truth, naive


def ln_dx_expanded(x, g, w, eps, nd: int) -> torch.Tensor:
    """LayerNorm's dx in x's dtype the way torch's CPU/CUDA kernels form it, dx = rstd g w + b x + c
    (b, c per token from sum(g w x) and sum(g w)): a second naive yardstick. Where the variance is
    small next to the offset, b x and c cancel, so it rounds differently from autograd's form."""
    dims = tuple(range(-nd, 0))
    n = math.prod(x.shape[-nd:])
    x, g = x.cpu(), g.cpu().to(x.dtype)
    gw = g if w is None else g * w.to(x.dtype)
    mean = x.mean(dims, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(dims, keepdim=True) + eps)
    ds, db = (gw * x).sum(dims, keepdim=True), gw.sum(dims, keepdim=True)
    b = (db * mean - ds) * rstd.pow(3) / n
    return rstd * gw + b * x + (-b * mean - db * rstd / n)


def _ln(target, cfg):
    x = cfg.x(target.device)
    g = upstream(cfg.shape, cfg.torch_dtype, cfg.generator(salt=9), target.device)
    w, b = cfg.params()
    params = {"weight": w, "bias": b} if cfg.affine else {}
    mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **params)
    grads = module_grads(target, mod, cfg, x, g, tuple(params))
    truth, naive = truth_and_naive(lambda x, w=None, b=None, **kw: layer_norm_math(x, cfg.normalized_shape, w, b,
                                                                                    cfg.eps, **kw),
                                   x, g, list(params.values()))
    expanded = ln_dx_expanded(x, g, params.get("weight"), cfg.eps, len(cfg.normalized_shape))
    naive[0] = tolerance.worst_naive(truth[0], [naive[0], expanded])
    return grads, truth, naive, x


def check_layernorm(target, cfg):
    """LayerNorm's dx, dweight and dbias equal float64 autograd of the reference math."""
    grads, truth, naive, x = _ln(target, cfg)
    assert_grads(("dx", "dweight", "dbias"), grads, truth, naive, x.dtype,
                 f"of LayerNorm({cfg.normalized_shape}, eps={cfg.eps})")


def check_shift_invariance(target, cfg):
    """LN(x + c) = LN(x) for a constant c, so each token's dx sums to 0 over normalized_shape
    (the backward's mean(gw) term): |sum dx| within K_GRAD x the naive backward's |sum dx| plus
    the floor relative to the summed magnitudes sum |dx| (the sum cancels terms that large)."""
    (dx, *_), (tdx, *_), (ndx, *_), x = _ln(target, cfg)
    nd = len(cfg.normalized_shape)

    def total(d):
        return d.double().cpu().flatten(start_dim=d.dim() - nd).sum(-1)  # (*lead,)
    got, truth = total(dx), total(tdx)
    magnitude = float(total(tdx.abs()).max())
    allowed = (tolerance.K_GRAD * tolerance.naive_error(truth, total(ndx))
               + tolerance.floor_for(x.dtype) * max(1.0, magnitude))
    worst = float((got - truth).abs().nan_to_num(float("inf")).max())
    if worst > allowed:
        t = tuple(int(i) for i in torch.nonzero((got - truth).abs().nan_to_num(float("inf")) == worst)[0])
        raise AssertionError(f"token {t}'s dx sums to {float(got[t]):.4g} over normalized_shape "
                             f"{cfg.normalized_shape}, must be 0 (LN(x + c) = LN(x)): allowed {allowed:.3e} "
                             f"(= {tolerance.K_GRAD:g} x the naive backward's sum + floor x sum |dx| = "
                             f"{magnitude:.3g}); the backward lacks the mean-of-gradient term")


def check_rmsnorm(target, cfg):
    """RMSNorm's dx and dweight equal float64 autograd of the reference math (the rms depends on x)."""
    x = cfg.x(target.device)
    g = upstream(cfg.shape, cfg.torch_dtype, cfg.generator(salt=9), target.device)
    mod, gamma = _rms(target, cfg, cfg.eps, cfg.params()[0])
    grads = module_grads(target, mod, cfg, x, g, ("weight",) if cfg.affine else ())
    truth, naive = truth_and_naive(lambda x, w=None, **kw: rms_norm_math(x, cfg.normalized_shape, w, cfg.eps, **kw),
                                   x, g, [] if gamma is None else [gamma])
    assert_grads(("dx", "dweight"), grads, truth, naive, x.dtype, f"of RMSNorm({cfg.normalized_shape}, eps={cfg.eps})")


@pytest.mark.needs(LN)
@given(cfg=norm_configs())
@covering(regimes.NORMS[:2])
def test_layernorm(target, cfg):
    run(target, check_layernorm, cfg)


@pytest.mark.needs(LN)
@given(cfg=norm_configs(min_features=2))
def test_shift_invariance(target, cfg):
    run(target, check_shift_invariance, cfg)


@pytest.mark.needs(RMS)
@given(cfg=norm_configs())
@covering(regimes.NORMS[:2])
def test_rmsnorm(target, cfg):
    run(target, check_rmsnorm, cfg)
