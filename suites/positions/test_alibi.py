"""ALiBi conformance (Press et al., "Train Short, Test Long").

    bias[h, i, j] = -slope_h * (p - j),  p = i + Lk - Lq   (queries aligned to the end of the keys)
    slopes = the paper's get_slopes(H)

Softmax ignores a per-row constant, so every check first subtracts each row's
value at its own position j = p and looks only at the causal keys j <= p: Bloom's
slope_h * j (one row shared by all queries) is the same bias and passes.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.spec import tolerance
from harness.suites.positions.configs import ALIBI_HEADS, alibi_configs
from harness.suites.kit import impl, run, unverified, verified
from harness.reference.alibi import alibi_distance, alibi_math, get_slopes
from harness.suites.positions.helpers import expect_floating

PROPERTY_PREFIX = "alibi"
SLOPES, BIAS = "alibi_slopes", "alibi_bias"


def call_bias(target, H: int, Lq: int, Lk: int, shard: tuple[int, int] | None = None
              ) -> tuple[torch.Tensor, torch.dtype]:
    """(the target's bias (H, Lq, Lk) as float64 on the CPU with each row's value at its own
    position j = p subtracted, the dtype it returned); ``shard=(h0, h1)``: the call takes it, and the
    bias holds those h1 - h0 heads."""
    n = H if shard is None else shard[1] - shard[0]
    out = impl(target, BIAS)(H, Lq, Lk) if shard is None else impl(target, BIAS)(H, Lq, Lk, shard=shard)
    out = expect_floating(out, BIAS, (n, Lq, Lk))
    p = torch.arange(Lq) + (Lk - Lq)
    own = out.double().cpu().gather(-1, p.view(1, Lq, 1).expand(n, Lq, 1))  # (n, Lq, 1)
    return out.double().cpu() - own, out.dtype


def causal(Lq: int, Lk: int) -> torch.Tensor:
    """(Lq, Lk) bool: key j <= p, the keys a causal query sees."""
    return alibi_distance(Lq, Lk) >= 0


def reference(H, Lq, Lk, dtype):
    """(truth, naive) of the bias with the row constant removed (it is 0 at j = p already)."""
    return alibi_math(H, Lq, Lk), alibi_math(H, Lq, Lk, compute_dtype=dtype).double()


def fitted_slopes(rel: torch.Tensor, Lq: int, Lk: int) -> torch.Tensor:
    """The least-squares s_h of rel = -s_h * distance over every causal key of every row: (H,).
    (A fit, not one difference: with Bloom's slope * j form the row constant is large and a
    single difference would mostly measure its rounding.)"""
    dist = alibi_distance(Lq, Lk).clamp_min(0)  # (Lq, Lk): 0 at and after the query's own position
    return -(rel * dist).sum(dim=(-2, -1)) / (dist * dist).sum()


def check_slopes(target, cfg):
    """alibi_slopes(H) equals the paper's get_slopes(H) for the drawn H and every H in
    {1, 2, 4, 5, 6, 8, 12, 16, 20} (non-powers of two interleave the next power's slopes)."""
    for H in sorted({cfg.heads, *unverified(target, "slopes", ALIBI_HEADS)}):
        out = expect_floating(impl(target, SLOPES)(H), SLOPES, (H,))
        ref = torch.tensor(get_slopes(H), dtype=torch.float64)
        try:
            tolerance.assert_close(out, ref, ref.to(out.dtype), dtype=out.dtype, what=f"slopes for H={H}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n  got      {[round(v, 6) for v in out.tolist()]}\n"
                                 f"  expected {[round(v, 6) for v in ref.tolist()]}") from None
        verified(target, "slopes", H)


def check_linear_bias(target, cfg):
    """After removing each row's constant (softmax ignores it; Bloom's slope * j form is correct): over the
    causal keys of every row, bias - (the row's value at j = p) is -s_h * (p - j): linear in the distance
    with one slope s_h > 0 per head, so <= 0 and decreasing with distance."""
    H, Lq, Lk = cfg.heads, cfg.Lq, cfg.Lk
    rel, dtype = call_bias(target, H, Lq, Lk)
    s = fitted_slopes(rel, Lq, Lk)  # (H,)
    if not bool((s > 0).all()):
        h = int((s <= 0).nonzero()[0])
        raise AssertionError(f"head {h}: the key one step before the query is biased {-s[h]:+.4g} relative to "
                             f"the query's own position; ALiBi penalises distance (must be < 0)")
    dist = alibi_distance(Lq, Lk)
    vis = causal(Lq, Lk).expand(H, Lq, Lk)
    linear = -s.view(H, 1, 1) * dist  # (H, Lq, Lk)
    truth, naive = reference(H, Lq, Lk, dtype)
    allowed = tolerance.allowance(truth[vis], naive[vis], dtype=dtype)
    diff = (rel - linear).abs().masked_fill(~vis, 0).nan_to_num(float("inf"))
    if float(diff.max()) > 2 * allowed:
        h, i, j = (int(v) for v in (diff == diff.max()).nonzero()[0])
        raise AssertionError(f"head {h}, query {i}, key {j} (distance {int(dist[i, j])}): relative bias "
                             f"{rel[h, i, j]:.6g}, but a linear bias with this head's slope {s[h]:.6g} gives "
                             f"{linear[h, i, j]:.6g}; differ by {diff.max():.3e} (allowed {2 * allowed:.3e})")


def compare_causal_part(target, H: int, Lq: int, Lk: int):
    """The target's bias (H, Lq, Lk) and the float64 truth, both minus their row constants, the
    causal mask (H, Lq, Lk) and the policy's comparison on the causal part."""
    rel, dtype = call_bias(target, H, Lq, Lk)
    vis = causal(Lq, Lk).expand(H, Lq, Lk)
    truth, naive = reference(H, Lq, Lk, dtype)
    return rel, truth, vis, tolerance.compare(rel[vis], truth[vis], naive[vis], dtype=dtype)


def check_end_alignment(target, cfg):
    """Shape (H, Lq, Lk) with Lq < Lk: query row i sits at position p = i + Lk - Lq (aligned to the
    end of the keys, as with a KV cache); up to the per-row constant the causal part equals
    -slope_h * (p - j)."""
    H, Lq, Lk = cfg.heads, cfg.Lq, cfg.Lk
    rel, truth, vis, cmp = compare_causal_part(target, H, Lq, Lk)
    if not cmp.ok:
        diff = (rel - truth).abs().masked_fill(~vis, 0)
        h, i, j = (int(v) for v in (diff == diff.max()).nonzero()[0])
        row = ", ".join(f"{v:.3g}" for v in rel[h, i, : i + Lk - Lq + 1][-8:].tolist())
        want = ", ".join(f"{v:.3g}" for v in truth[h, i, : i + Lk - Lq + 1][-8:].tolist())
        raise AssertionError(f"Lq={Lq}, Lk={Lk}: head {h}, query row {i} (position {i + Lk - Lq}), key {j}: "
                             f"{cmp.describe()}\n  row (last causal keys, minus the row constant): [{row}]"
                             f"\n  expected (queries aligned to the end of the keys):           [{want}]")


def check_head_slopes(target, cfg):
    """Head h's bias uses slope h of get_slopes(H), in order: with Lq = Lk (where every query
    alignment agrees) each head's causal part, up to the per-row constant, is -get_slopes(H)[h]
    * distance."""
    H, Lq, Lk = cfg.heads, cfg.Lq, cfg.Lk
    rel, truth, vis, cmp = compare_causal_part(target, H, Lq, Lk)
    if not cmp.ok:
        got = fitted_slopes(rel, Lq, Lk)
        ref = torch.tensor(get_slopes(H), dtype=torch.float64)
        h = int((got - ref).abs().argmax())
        raise AssertionError(f"head {h}'s bias has slope {got[h]:.6g}, get_slopes({H})[{h}] = {ref[h]:.6g}: "
                             f"{cmp.describe()}\n  per-head slopes in the bias {[round(v, 5) for v in got.tolist()]}"
                             f"\n  get_slopes({H})             {[round(v, 5) for v in ref.tolist()]}")


@pytest.mark.needs(SLOPES)
@given(cfg=alibi_configs())
def test_slopes(target, cfg):
    run(target, check_slopes, cfg)


@pytest.mark.needs(BIAS)
@given(cfg=alibi_configs(min_keys=2))
def test_linear_bias(target, cfg):
    run(target, check_linear_bias, cfg)


@pytest.mark.needs(BIAS)
@given(cfg=alibi_configs(distinct_lengths=True))
def test_end_alignment(target, cfg):
    run(target, check_end_alignment, cfg)


@pytest.mark.needs(BIAS)
@given(cfg=alibi_configs(min_keys=2, square=True))
def test_head_slopes(target, cfg):
    run(target, check_head_slopes, cfg)
