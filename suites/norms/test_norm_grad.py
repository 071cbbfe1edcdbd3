"""LayerNorm / RMSNorm backward conformance: dx (*lead, *normalized_shape), dweight and dbias
(*normalized_shape).

    LayerNorm: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),  gw = g * weight
    RMSNorm:   dx = rstd * (gw - x * rstd^2 * mean(gw * x))
    dweight = sum over tokens of g * xhat (RMSNorm: g * x * rstd),  dbias = sum over tokens of g

The target's module is built like torch.nn (``suites.norms.helpers.build``), random weight and bias are
written into it, and its forward and backward run in its worker with a random upstream gradient
g; every gradient is compared with float64 autograd of ``reference.layernorm`` /
``reference.rmsnorm`` under the policy (``K_GRAD`` x autograd of the same math in the input
dtype + floor + C_TERMS u x the running-error magnitudes of ``suites.magnitudes``: x - mean,
gw - mean(gw) and the RMS term cancel, e.g. to exactly 0 for one normalized element). eps is
always passed explicitly, so the rmsnorm_eps convention does not enter.

The residual block (``residual_block(dim, sublayer)``) wraps the harness's linear sublayer
f(h) = h W^T (W (dim, dim), scaled so both paths carry gradients of one size); its forward is
matched to one of x + f(norm(x)) (pre) / norm(x + f(x)) (post) with a fresh LayerNorm or RMSNorm
(identity affine), and dx and dW are compared with float64 autograd of that block. The block's
eps is not part of the protocol: x has std 32, so eps <= 1e-5 moves the result by < 1e-8
relative, and the naive yardstick is the worst of eps in {0, 1e-6, 1e-5}.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.boundary import module_tensors
from harness.suites import regimes
from harness.suites.norms.configs import NormConfig, norm_configs
from harness.suites.kit import ImplementationError, impl, is_module, move, on_target, run
from harness.suites.regimes import covering
from harness.boundary.target_ops import LinearSublayer, module_gradcheck
from harness.reference.layernorm import layer_norm_math
from harness.suites.magnitudes import layer_norm_grad_terms, rms_norm_grad_terms
from harness.reference.rmsnorm import rms_norm_math
from harness.suites.gradients import (GRADCHECK, assert_grads, autograd_of, gradcheck_options, skip_unless_float64, target_grads,
                              upstream)
from harness.suites.norms.helpers import BLOCK, LN, RMS, build, naive_dtype
from harness.suites.norms.test_rmsnorm import build_rms

PROPERTY_PREFIX = "norm_grad"
pytestmark = pytest.mark.uses("backward")


def tensor_paths(name: str, roles) -> tuple[str, ...]:
    """Where the target's norm ``name`` keeps its tensors ``roles`` ("weight", "bias"): the paths
    ``module_tensors`` writes them through (the same reading as ``build``'s)."""
    return tuple(module_tensors.RULES[(name, role)] for role in roles)


def module_grads(target, mod, name: str, cfg, x, g, roles: tuple[str, ...]):
    """[dx, d(each of roles)] of the target's module ``name``."""
    params = tensor_paths(name, roles)
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
    grads = module_grads(target, mod, LN, cfg, x, g, tuple(params))
    truth, naive = truth_and_naive(lambda x, w=None, b=None, **kw: layer_norm_math(x, cfg.normalized_shape, w, b,
                                                                                    cfg.eps, **kw),
                                   x, g, list(params.values()))
    expanded = ln_dx_expanded(x, g, params.get("weight"), cfg.eps, len(cfg.normalized_shape))
    naive[0] = tolerance.worst_naive(truth[0], [naive[0], expanded])
    terms = layer_norm_grad_terms(x, g, cfg.normalized_shape, params.get("weight"), params.get("bias"), cfg.eps)
    return grads, truth, naive, x, terms


def check_layernorm(target, cfg):
    """LayerNorm's dx, dweight and dbias equal float64 autograd of the reference math."""
    grads, truth, naive, x, terms = _ln(target, cfg)
    assert_grads(("dx", "dweight", "dbias"), grads, truth, naive, x.dtype,
                 f"of LayerNorm({cfg.normalized_shape}, eps={cfg.eps})", terms=terms)


def check_shift_invariance(target, cfg):
    """LN(x + c) = LN(x) for a constant c, so each token's dx sums to 0 over normalized_shape
    (the backward's mean(gw) term): |sum dx| within K_GRAD x the naive backward's |sum dx| plus
    the floor relative to the summed magnitudes sum |dx| (the sum cancels terms that large) plus
    C_TERMS u x the sum of dx's running-error magnitudes."""
    (dx, *_), (tdx, *_), (ndx, *_), x, (mdx, *_) = _ln(target, cfg)
    nd = len(cfg.normalized_shape)

    def total(d):
        return d.double().cpu().flatten(start_dim=d.dim() - nd).sum(-1)  # (*lead,)
    got, truth = total(dx), total(tdx)
    magnitude = float(total(tdx.abs()).max())
    allowed = (tolerance.K_GRAD * tolerance.naive_error(truth, total(ndx))
               + tolerance.floor_for(x.dtype) * max(1.0, magnitude)
               + float(tolerance.terms_allowance(total(mdx), truth.shape, x.dtype).max()))
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
    mod, gamma = build_rms(target, cfg, cfg.eps, cfg.params()[0])
    grads = module_grads(target, mod, RMS, cfg, x, g, ("weight",) if cfg.affine else ())
    truth, naive = truth_and_naive(lambda x, w=None, **kw: rms_norm_math(x, cfg.normalized_shape, w, cfg.eps, **kw),
                                   x, g, [] if gamma is None else [gamma])
    terms = rms_norm_grad_terms(x, g, cfg.normalized_shape, gamma, cfg.eps)
    assert_grads(("dx", "dweight"), grads, truth, naive, x.dtype, f"of RMSNorm({cfg.normalized_shape}, eps={cfg.eps})",
                 terms=terms)


#: the residual block's input std: eps (<= 1e-5) / var < 1e-8, below the float32 floor
BLOCK_STD = 32.0
BLOCK_EPS = (1e-5, 0.0, 1e-6)  # the truth's eps first


def block_math(placement: str, norm: str, eps: float, dtype: torch.dtype):
    """(x, W) -> the block's output in ``dtype``: pre x + f(n(x)) or post n(x + f(x)), n a fresh
    LayerNorm or RMSNorm (identity affine) over the last dim."""
    def n(h):
        if norm == "layernorm":
            return layer_norm_math(h, (h.shape[-1],), eps=eps, compute_dtype=dtype)
        return rms_norm_math(h, (h.shape[-1],), eps=eps, compute_dtype=dtype)

    def block(x, w):
        x, w = x.to(dtype), w.to(dtype)
        return x + n(x) @ w.T if placement == "pre" else n(x + x @ w.T)
    return block


def check_residual_block(target, cfg):
    """``residual_block(dim, sublayer)`` around the harness's linear sublayer f(h) = h W^T (x of std 32, W scaled so
    both paths carry gradients of one size): dx and the sublayer's dW equal float64 autograd of the block
    its forward is (pre- or post-norm, LayerNorm or RMSNorm, matched from the output); the residual path's
    identity gradient (dx = g + ... for pre-norm) and the sublayer path's both arrive. The block's eps is
    not the protocol's: the yardstick is the worst of eps 0, 1e-6, 1e-5."""
    dim, dtype = cfg.normalized_shape[0], cfg.torch_dtype
    gen = cfg.generator(salt=3)
    w = (torch.randn(dim, dim, generator=gen, dtype=torch.float64) * (BLOCK_STD / dim ** 0.5)).to(dtype).double()
    sub = on_target(target, LinearSublayer, w)
    block = impl(target, BLOCK)(dim, sub)
    if not is_module(block):
        raise ImplementationError(f"{BLOCK}({dim}, sublayer) returned {type(block).__name__}, not an nn.Module")
    block = move(target, block, BLOCK, device=target.device, dtype=dtype)
    x = cfg.x(target.device, std=BLOCK_STD)
    g = upstream(cfg.shape, dtype, cfg.generator(salt=9), target.device)
    out, (dx,), pg = target_grads(target, block, (x,), {}, (0,), g, module=sub, params=("weight",))
    dw = torch.zeros(dim, dim) if pg["weight"] is None else pg["weight"]
    found = None
    for kind in (("pre", "layernorm"), ("pre", "rmsnorm"), ("post", "layernorm"), ("post", "rmsnorm")):
        ref = block_math(*kind, BLOCK_EPS[0], torch.float64)(x.double().cpu(), w)
        nai = tolerance.worst_naive(ref, [block_math(*kind, eps, naive_dtype(dtype))(x.cpu(), w).to(dtype)
                                          for eps in BLOCK_EPS])
        if tolerance.compare(out, ref, nai, dtype=dtype).ok:
            found = kind
            break
    if found is None:
        raise AssertionError(f"{BLOCK}({dim}, f)'s forward matches none of x + f(norm(x)) and norm(x + f(x)) "
                             f"with a fresh LayerNorm or RMSNorm, so its backward has no reference "
                             f"(see norm_placement.placement)")
    truth = autograd_of(block_math(*found, BLOCK_EPS[0], torch.float64), [x.double(), w], g.double())
    cands = [autograd_of(block_math(*found, eps, naive_dtype(dtype)), [x, w.to(dtype)], g) for eps in BLOCK_EPS]
    naive = [tolerance.worst_naive(t, [c[i] for c in cands]) for i, t in enumerate(truth)]
    what = (f"of {BLOCK}({dim}, f) ({found[0]}-norm {found[1]}, f(h) = h W^T): dx must carry the residual "
            f"path's identity gradient and the sublayer path's")
    assert_grads(("dx", "the sublayer's dW"), [dx, dw], truth, naive, dtype, what)


@st.composite
def tiny_norm_configs(draw) -> NormConfig:
    """float64, 2-3 tokens of 3-6 features (one or two normalized dims): gradcheck's Jacobians stay small."""
    return NormConfig(lead=draw(st.sampled_from([(2,), (1, 3)])),
                      normalized_shape=draw(st.sampled_from([(3,), (4,), (6,), (2, 3)])), dtype="float64",
                      eps=draw(st.sampled_from([1e-5, 0.1])), affine=draw(st.booleans()), log2_scale=0,
                      seed=draw(st.integers(0, 2**32 - 1)))


def check_gradcheck(target, cfg):
    """``torch.autograd.gradcheck`` in float64 on tiny shapes (2-3 tokens of 3-6 features, eps 1e-5 or 0.1,
    affine or not) of the target's LayerNorm or RMSNorm (whichever it defines; both: by the seed's parity),
    with respect to x and, when affine, the weight (and LayerNorm's bias), swapped in with
    ``torch.func.functional_call``: the backward's Jacobian equals central differences of the target's own
    forward within 1e-8 + 1e-6 x |numerical| (a backward 3e-6 off fails here); ``unsupported (declared:
    ...)`` without float64."""
    names = [n for n in (LN, RMS) if n in target.available()]
    name = names[cfg.seed % len(names)]
    x = cfg.x(target.device)
    w, b = cfg.params()
    if name == LN:
        params = {"weight": w, "bias": b} if cfg.affine else {}
        mod = build(target, LN, cfg, eps=cfg.eps, affine=cfg.affine, **params)
    else:
        mod, gamma = build_rms(target, cfg, cfg.eps, w)
        params = {"weight": gamma} if cfg.affine else {}
    g = upstream(cfg.shape, cfg.torch_dtype, cfg.generator(salt=9), target.device)
    module_grads(target, mod, name, cfg, x, g, tuple(params))  # a target without a backward is unsupported
    why = on_target(target, module_gradcheck, mod, x, tensor_paths(name, params), **gradcheck_options(target))
    if why is not None:
        inputs = ", ".join(f"{i} = {n}" for i, n in enumerate(("x", *params)))
        raise AssertionError(f"gradcheck of {name}({cfg.ctor_shape}, eps={cfg.eps}) (inputs {inputs}; "
                             f"{GRADCHECK}) failed: {why}")


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


@pytest.mark.needs(BLOCK)
@given(cfg=norm_configs(max_ns_dims=1, min_features=2))
def test_residual_block(target, cfg):
    run(target, check_residual_block, cfg)


@given(cfg=tiny_norm_configs())
def test_gradcheck(target, cfg):
    if not {LN, RMS} & set(target.available()):
        pytest.skip(f"target {target.spec!r} has no attribute {LN!r} or {RMS!r}")
    skip_unless_float64(target, cfg)
    run(target, check_gradcheck, cfg)
