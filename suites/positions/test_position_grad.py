"""Position-encoding backward conformance: RoPE's dx (B, H, L, D) and the learned table's
gradient (max_positions, dim).

    RoPE:    y = R(m theta) x  =>  dx = R(m theta)^T g = R(-m theta) g   (per pair a rotation back)
    learned: y = weight[positions]  =>  dweight[p] = sum of the upstream rows at every use of p

The target's forward and backward run in its worker with a random upstream gradient g; the
gradients are compared with float64 autograd of ``reference.rope.rope_math`` (in the pairing
the forward uses, measured by the basis-vector probe) and with the float64 sum of upstream rows,
under the policy with ``K_GRAD`` (the table's gradient, a sum of upstream rows that may cancel,
also with C_TERMS u x sum |rows|); rows of the table no position uses get exactly zero.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.suites import regimes
from harness.suites.positions.configs import RopeConfig, learned_configs, rope_configs
from harness.suites.regimes import covering
from harness.suites.kit import on_target, run
from harness.boundary.target_ops import gradcheck
from harness.reference.rope import pair_indices, rope_math
from harness.suites.gradients import (GRADCHECK, assert_grads, assert_zero, autograd_of, gradcheck_options, skip_unless_float64,
                              target_grads, upstream)
from harness.suites.positions.helpers import ROPE, call_rope, declared_or, measure_rope_layout, rope_naive
from harness.suites.positions.test_learned_positions import LPE, build, table_path

PROPERTY_PREFIX = "position_grad"
pytestmark = pytest.mark.uses("backward")


def _rope(target, cfg):
    """(x, positions, g, the target's dx, float64 autograd dx, naive autograd dx, layout)."""
    layout = declared_or(target, measure_rope_layout(target, cfg.D, cfg.base)[0])
    x, pos = cfg.x(target.device), cfg.positions(target.device)
    g = upstream(x.shape, x.dtype, cfg.generator(salt=9), target.device)
    _, (dx,), _ = target_grads(target, target.lookup(ROPE), (x, pos), {"base": cfg.base}, (0,), g)
    (truth,) = autograd_of(lambda t: rope_math(t, pos.cpu(), cfg.base, layout), [x.double()], g.double())
    (naive,) = autograd_of(lambda t: rope_naive(t, pos, cfg.base, layout), [x], g)
    return x, pos, g, dx, truth, naive, layout


def check_rope_dx(target, cfg):
    """RoPE's dx equals float64 autograd of the reference rotation (in the target's pairing)."""
    x, _, _, dx, truth, naive, layout = _rope(target, cfg)
    assert_grads(("dx",), [dx], [truth], [naive], x.dtype, f"of RoPE ({layout} pairs, base {cfg.base:g})")


def check_rope_inverse(target, cfg):
    """dx is g rotated *back*: each pair of dx has the norm of g's pair, and the target's own
    forward applied to dx gives g again (R(m) R(-m) = 1); rotating forward gives R(2m) g."""
    x, pos, g, dx, truth, naive, layout = _rope(target, cfg)
    first, second = pair_indices(cfg.D, layout)

    def pair_norms(t):
        t = t.double().cpu()
        return torch.hypot(t[..., first], t[..., second])
    tolerance.assert_close(pair_norms(dx), pair_norms(g), pair_norms(naive), dtype=x.dtype,
                           what="the norm of each rotated pair of dx (must be g's)", k=tolerance.K_GRAD)
    back = call_rope(target, dx, pos, cfg.base)
    tolerance.assert_close(back, g.double(), rope_naive(naive.to(x.dtype), pos, cfg.base, layout), dtype=x.dtype,
                           what="RoPE(dx) (dx must be R(-m theta) g, so rotating it forward gives g)",
                           k=tolerance.K_GRAD)


def check_embedding_sum(target, cfg):
    """The table's gradient: row p is the sum of the upstream rows at every position that looks
    up p (a repeated position sums, never overwrites); rows nobody looks up are exactly zero."""
    mod, table = build(target, cfg)
    pos = cfg.positions(target.device).clone()
    flat = pos.view(-1)
    if flat.numel() > 1:
        flat[0] = flat[-1]  # at least one position used twice
    g = upstream((*pos.shape, cfg.dim), table.dtype, cfg.generator(salt=9), target.device)
    path = table_path(target, mod, cfg)  # the table every learned-positions property reads
    _, _, grads = target_grads(target, mod, (pos,), {}, (), g, module=mod, params=(path,))
    got = grads[path] if grads[path] is not None else torch.zeros(table.shape)
    rows, idx = g.reshape(-1, cfg.dim).cpu(), flat.cpu()
    truth = torch.zeros(table.shape, dtype=torch.float64).index_add_(0, idx, rows.double())
    naive = torch.zeros(table.shape, dtype=table.dtype).index_add_(0, idx, rows)
    terms = torch.zeros(table.shape, dtype=torch.float64).index_add_(0, idx, rows.double().abs())  # sum |rows|
    used = torch.zeros(cfg.max_positions, dtype=torch.bool)
    used[idx] = True
    assert_zero(got, ~used, 0, "the gradient of table rows no position looks up")
    counts = torch.bincount(idx, minlength=cfg.max_positions)
    p = int(counts.argmax())
    assert_grads(("the table's gradient",), [got], [truth], [naive], table.dtype,
                 f"(must be the sum of the upstream rows of each position; position {p} is used "
                 f"{int(counts[p])} times: expected row {truth[p, :3].tolist()}..., got "
                 f"{got[p, :3].double().tolist()}...)", terms=[terms])


@st.composite
def tiny_rope_configs(draw) -> RopeConfig:
    """float64, 1-2 heads of 2-4 positions drawn from [0, 65536) (per batch item or shared), D in
    {4, 6, 8}: small Jacobians at positions where a float32 angle is up to 4e-3 off."""
    per_batch = draw(st.booleans())
    return RopeConfig(batch=2 if per_batch else 1, heads=draw(st.integers(1, 2)), L=draw(st.integers(2, 4)),
                      D=draw(st.sampled_from([4, 6, 8])), dtype="float64", base=draw(st.sampled_from([1e4, 5e5])),
                      offset=0, spread=65536, per_batch=per_batch, shift=0, seed=draw(st.integers(0, 2**32 - 1)))


def check_gradcheck(target, cfg):
    """``torch.autograd.gradcheck`` of RoPE in float64 with respect to x on tiny shapes (1-2 heads of 2-4
    positions drawn from [0, 65 536), D in {4, 6, 8}): the backward's Jacobian equals central differences
    of the target's own forward within 1e-8 + 1e-6 x |numerical|, so a backward that rotates by other
    angles than the forward (float32 angles for a float64 input) fails; ``unsupported (declared: ...)``
    without float64."""
    x, pos = cfg.x(target.device), cfg.positions(target.device)
    g = upstream(x.shape, x.dtype, cfg.generator(salt=9), target.device)
    fn = target.lookup(ROPE)
    target_grads(target, fn, (x, pos), {"base": cfg.base}, (0,), g)  # a target without a backward is unsupported
    why = on_target(target, gradcheck, fn, (x, pos), {"base": cfg.base}, (0,), **gradcheck_options(target))
    if why is not None:
        raise AssertionError(f"gradcheck of {ROPE} (input 0 = x, positions {pos.flatten().tolist()}, base "
                             f"{cfg.base:g}; {GRADCHECK}) failed: {why}")


@pytest.mark.needs(ROPE)
@given(cfg=rope_configs())
@covering(regimes.ROPE[1:3])
def test_rope_dx(target, cfg):
    run(target, check_rope_dx, cfg)


@pytest.mark.needs(ROPE)
@given(cfg=rope_configs())
def test_rope_inverse(target, cfg):
    run(target, check_rope_inverse, cfg)


@pytest.mark.needs(LPE)
@given(cfg=learned_configs())
def test_embedding_sum(target, cfg):
    run(target, check_embedding_sum, cfg)


@pytest.mark.needs(ROPE)
@given(cfg=tiny_rope_configs())
def test_gradcheck(target, cfg):
    skip_unless_float64(target, cfg)
    run(target, check_gradcheck, cfg)
