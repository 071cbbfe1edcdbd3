"""ALiBi under tensor parallelism: a rank's head shard keeps the full model's slopes.

    alibi_slopes(H, shard=(h0, h1)) = get_slopes(H)[h0:h1]          (h1 - h0,)
    alibi_bias(H, Lq, Lk, shard=(h0, h1)) = alibi_bias(H, Lq, Lk)[h0:h1]

A rank that holds heads h0 .. h1 - 1 of an H-head model must not compute get_slopes(h1 - h0): that
is the slope list of a smaller model (its first head's slope 2^(-8 / (h1 - h0)), not 2^(-8 (h0 + 1) / H)),
and every rank then biases its heads alike, silently, with numbers that look like ALiBi. The shard is
an optional parameter: a function without it is reported unsupported, never failed.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.reference.alibi import alibi_math, get_slopes
from harness.spec import tolerance
from harness.suites.kit import impl, require_features, run
from harness.suites.positions.configs import alibi_shard_configs
from harness.suites.positions.helpers import expect_floating
from harness.suites.positions.test_alibi import call_bias, causal, fitted_slopes

PROPERTY_PREFIX = "alibi_shard"
SLOPES, BIAS = "alibi_slopes", "alibi_bias"


def _which(got: torch.Tensor, H: int, shard: tuple[int, int]) -> str:
    """What the wrong slopes are, when they are a known mistake."""
    h0, h1 = shard
    local = torch.tensor(get_slopes(h1 - h0), dtype=torch.float64)
    if got.shape == local.shape and torch.allclose(got, local, rtol=1e-3, atol=0):
        return (f"\n  these are get_slopes({h1 - h0}): the slopes of a model with the shard's head count, "
                f"not heads {h0}..{h1 - 1} of the {H}-head model")
    return ""


def check_slopes(target, cfg):
    """For every tensor-parallel rank's shard (and one uneven shard) of an H-head model,
    alibi_slopes(H, shard=(h0, h1)) equals get_slopes(H)[h0:h1] (not get_slopes(h1 - h0))."""
    require_features(target, "alibi_slopes_shard")
    H = cfg.heads
    for h0, h1 in cfg.shards():
        out = expect_floating(impl(target, SLOPES)(H, shard=(h0, h1)), SLOPES, (h1 - h0,))
        ref = torch.tensor(get_slopes(H)[h0:h1], dtype=torch.float64)
        cmp = tolerance.compare(out, ref, ref.to(out.dtype), dtype=out.dtype)
        if not cmp.ok:
            got = out.double().cpu()
            raise AssertionError(f"alibi_slopes({H}, shard=({h0}, {h1})) (tensor parallelism: {cfg.tp} ranks of "
                                 f"{H // cfg.tp} heads): {cmp.describe()}\n  got      "
                                 f"{[round(v, 6) for v in got.tolist()]}\n  expected "
                                 f"{[round(v, 6) for v in ref.tolist()]} (get_slopes({H})[{h0}:{h1}])"
                                 f"{_which(got, H, (h0, h1))}")


def check_bias(target, cfg):
    """alibi_bias(H, Lq, Lk, shard=(h0, h1)) holds the rows of heads h0 .. h1 - 1 of the H-head bias:
    up to each row's constant (softmax ignores it), over the causal keys, -get_slopes(H)[h] * (p - j)."""
    require_features(target, "alibi_bias_shard")
    H, Lq, Lk = cfg.heads, cfg.Lq, cfg.Lk
    for h0, h1 in cfg.shards():
        rel, dtype = call_bias(target, H, Lq, Lk, shard=(h0, h1))
        vis = causal(Lq, Lk).expand(h1 - h0, Lq, Lk)
        truth = alibi_math(H, Lq, Lk, shard=(h0, h1))
        naive = alibi_math(H, Lq, Lk, compute_dtype=dtype, shard=(h0, h1)).double()
        cmp = tolerance.compare(rel[vis], truth[vis], naive[vis], dtype=dtype)
        if not cmp.ok:
            fitted = fitted_slopes(rel, Lq, Lk) if Lk > 1 else torch.zeros(h1 - h0)  # (one key: no distance)
            raise AssertionError(f"alibi_bias({H}, {Lq}, {Lk}, shard=({h0}, {h1})) ({cfg.tp} ranks of {H // cfg.tp} "
                                 f"heads): {cmp.describe()}\n  the shard's slopes in the bias "
                                 f"{[round(v, 5) for v in fitted.tolist()]}\n  get_slopes({H})[{h0}:{h1}]       "
                                 f"{[round(v, 5) for v in get_slopes(H)[h0:h1]]}"
                                 f"{_which(fitted, H, (h0, h1)) if Lk > 1 else ''}")


@pytest.mark.needs(SLOPES)
@given(cfg=alibi_shard_configs())
def test_slopes(target, cfg):
    run(target, check_slopes, cfg)


@pytest.mark.needs(BIAS)
@given(cfg=alibi_shard_configs())
def test_bias(target, cfg):
    run(target, check_bias, cfg)
