"""T5 relative position bucket conformance (Mesh TensorFlow / Hugging Face convention).

    relative_position = key position - query position;  buckets in [0, num_buckets)
    bidirectional: keys at/before the query in [0, nb), after it in [nb, 2 nb), nb = num_buckets // 2
    causal:        every key after the query -> bucket 0; the past uses nb = num_buckets buckets
    n = |distance| < max_exact = nb // 2: bucket n;  above: logarithmic up to max_distance, then capped

Buckets are integers, so comparisons are exact, except where the float32 logarithm
Mesh TF and Hugging Face use could land a distance on either side of a bucket
boundary (the float64 value within 1e-4 of an integer): there either bucket passes.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.suites.positions.configs import t5_bucket_configs
from harness.suites.kit import ImplementationError, impl, run, unverified, verified
from harness.reference.t5_bucket import log_position, t5_relative_position_bucket

PROPERTY_PREFIX = "t5_bucket"
T5 = "t5_relative_position_bucket"
pytestmark = pytest.mark.needs(T5)

#: (num_buckets, max_distance) the Mesh TF comparison always covers: T5's default and small/large ones
MESH_TF_GRID = ((32, 128), (8, 20), (16, 64), (64, 256), (10, 100), (128, 1000))


def call_bucket(target, rp: torch.Tensor, bidirectional: bool, nb: int, md: int) -> torch.Tensor:
    """The target's buckets: same shape as rp, an integer dtype; returned as int64 on the CPU."""
    out = impl(target, T5)(rp, bidirectional=bidirectional, num_buckets=nb, max_distance=md)
    name = f"{T5}(bidirectional={bidirectional}, num_buckets={nb}, max_distance={md})"
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"{name} returned {type(out).__name__}, expected a Tensor")
    if tuple(out.shape) != tuple(rp.shape):
        raise ImplementationError(f"{name} returned shape {tuple(out.shape)} for input {tuple(rp.shape)}")
    if out.dtype.is_floating_point or out.dtype.is_complex or out.dtype == torch.bool:
        raise ImplementationError(f"{name} returned dtype {out.dtype}; buckets are integers (they index "
                                  f"an embedding table)")
    return out.detach().cpu().to(torch.int64)


def accepted(rp: torch.Tensor, bidirectional: bool, nb: int, md: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi): the Mesh TF bucket, and the other bucket float32 rounding could give (== lo
    unless the logarithm lands within 1e-4 of a boundary)."""
    rp = rp.cpu()
    ref = t5_relative_position_bucket(rp, bidirectional, nb, md)
    half = nb // 2 if bidirectional else nb
    n = rp.abs() if bidirectional else (-rp).clamp_min(0)
    x = log_position(n, half, md)
    near = ((x - x.round()).abs() < 1e-4) & (n >= half // 2) & (x.round() <= half - 1)
    alt = ref + torch.where(near & (x.round() > x), 1, torch.where(near, -1, 0))
    return torch.minimum(ref, alt), torch.maximum(ref, alt)


def mismatch(out, rp, bidirectional, nb, md, what: str) -> None:
    lo, hi = accepted(rp, bidirectional, nb, md)
    bad = (out < lo) | (out > hi)
    if bad.any():
        idx = bad.nonzero()[0]
        r = rp.cpu()[tuple(idx)]
        shown = ", ".join(f"{int(a)}->{int(b)} (expected {int(c)})" for a, b, c in
                          zip(rp.cpu()[bad][:6], out[bad][:6], lo[bad][:6]))
        raise AssertionError(f"{what}: relative position {int(r)} gets bucket {int(out[tuple(idx)])}, the Mesh "
                             f"TensorFlow formula gives {int(lo[tuple(idx)])} (bidirectional={bidirectional}, "
                             f"num_buckets={nb}, max_distance={md}); {int(bad.sum())} wrong, e.g. {shown}")


def _span(cfg, extra: int = 0) -> torch.Tensor:
    """Every relative position from -(2 max_distance + extra) to +(2 max_distance + extra)."""
    R = 2 * cfg.max_distance + extra
    return torch.arange(-R, R + 1)


def check_range(target, cfg):
    """The output has the input's shape (1-D, (Lq, Lk), (1, Lq, Lk)), an integer dtype and
    values in [0, num_buckets), also for distances far past max_distance."""
    grid = cfg.relative_positions(target.device)
    far = torch.tensor([-10 ** 6, -cfg.max_distance * 5, 0, cfg.max_distance * 5, 10 ** 6], device=target.device)
    for rp in (grid, grid[None], grid.flatten(), far):
        out = call_bucket(target, rp, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
        if bool(((out < 0) | (out >= cfg.num_buckets)).any()):
            bad = ((out < 0) | (out >= cfg.num_buckets)).nonzero()[0]
            raise AssertionError(f"relative position {int(rp.cpu()[tuple(bad)])} gets bucket "
                                 f"{int(out[tuple(bad)])}, outside [0, {cfg.num_buckets})")


def check_relative_only(target, cfg):
    """The bucket of (query, key) depends only on key - query: a (Lq, Lk) grid whose queries
    start at an offset (KV-cache decoding) equals the buckets of its values one by one, and a
    transposed (non-contiguous) input gives the transposed output."""
    grid = cfg.relative_positions(target.device)  # (Lq, Lk), queries at query_offset + i
    out = call_bucket(target, grid, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
    values, index = torch.unique(grid.cpu(), return_inverse=True)
    single = call_bucket(target, values.to(target.device), cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
    expected = single[index]
    if not torch.equal(out, expected):
        i, j = (int(v) for v in (out != expected).nonzero()[0])
        raise AssertionError(f"query {i} (position {cfg.query_offset + i}), key {j}: relative position "
                             f"{int(grid[i, j])} gets bucket {int(out[i, j])} in the (Lq, Lk) grid but "
                             f"{int(expected[i, j])} on its own: the bucket must depend only on key - query")
    out_t = call_bucket(target, grid.T, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
    if not torch.equal(out_t, out.T):
        raise AssertionError("the buckets of the transposed (non-contiguous) grid are not the transposed buckets")


def check_bidirectional_halves(target, cfg):
    """Bidirectional: keys at or before the query (relative position <= 0) use [0, nb), keys after it
    use [nb, 2 nb), nb = num_buckets // 2, and bucket(+r) = bucket(-r) + nb."""
    nb = cfg.num_buckets // 2
    rp = _span(cfg)
    out = call_bucket(target, rp, True, cfg.num_buckets, cfg.max_distance)
    past, future = rp <= 0, rp > 0
    for sel, lo, hi, name in ((past, 0, nb, "at or before the query (key - query <= 0)"),
                              (future, nb, 2 * nb, "after the query (key - query > 0)")):
        bad = sel & ((out < lo) | (out >= hi))
        if bad.any():
            k = int(bad.nonzero()[0])
            raise AssertionError(f"relative position {int(rp[k])} (a key {name}) gets bucket {int(out[k])}; "
                                 f"that half is [{lo}, {hi}) (num_buckets={cfg.num_buckets}). Is the relative "
                                 f"position taken as query - key?")
    R = len(rp) // 2
    pos, neg = out[R + 1:], out[:R].flip(0)  # bucket(+r), bucket(-r) for r = 1 .. R
    if not torch.equal(pos, neg + nb):
        r = int((pos != neg + nb).nonzero()[0]) + 1
        raise AssertionError(f"bucket(+{r}) = {int(pos[r - 1])} but bucket(-{r}) + {nb} = {int(neg[r - 1]) + nb}: "
                             f"the two halves must mirror each other")


def check_causal_future(target, cfg):
    """Causal (bidirectional=False): every key after the query gets bucket 0, and the past uses the
    full range: bucket(-1) = 1 and bucket(-max_distance) = num_buckets - 1."""
    rp = _span(cfg)
    out = call_bucket(target, rp, False, cfg.num_buckets, cfg.max_distance)
    fut = (rp > 0) & (out != 0)
    if fut.any():
        k = int(fut.nonzero()[0])
        raise AssertionError(f"causal: relative position {int(rp[k])} (a key after the query) gets bucket "
                             f"{int(out[k])}, expected 0 (is the bidirectional flag inverted?)")
    R = len(rp) // 2
    b1, bmax = int(out[R - 1]), int(out[R - cfg.max_distance])
    if b1 != 1 or bmax != cfg.num_buckets - 1:
        raise AssertionError(f"causal: bucket(-1) = {b1}, bucket(-{cfg.max_distance}) = {bmax}; expected 1 and "
                             f"{cfg.num_buckets - 1}: the past must use all {cfg.num_buckets} buckets")


def check_exact_then_log(target, cfg):
    """Within a half: distances below max_exact = nb // 2 get their own bucket (bucket = distance),
    larger ones the logarithmic bucket of the Mesh TF formula; buckets never decrease as the
    distance grows."""
    rp = _span(cfg)
    out = call_bucket(target, rp, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
    half = cfg.num_buckets // 2 if cfg.bidirectional else cfg.num_buckets
    max_exact = half // 2
    R = len(rp) // 2
    n = torch.arange(R + 1)
    sides = [("past", out[: R + 1].flip(0), 0)]  # bucket(-n), n = 0 .. R
    if cfg.bidirectional:
        sides.append(("future", out[R:], half))  # bucket(+n) (n = 0 is the query itself: the past half)
    for name, b, offset in sides:
        exact = n < max_exact
        want = n + (offset if name == "future" else 0)
        want[0] = 0
        wrong = exact & (b != want)
        if wrong.any():
            k = int(wrong.nonzero()[0])
            raise AssertionError(f"{name} distance {k}: bucket {int(b[k])}, expected {int(want[k])} (distances "
                                 f"below max_exact = {max_exact} each have their own bucket)")
        if bool((b[1:] < b[:-1]).any()):
            k = int((b[1:] < b[:-1]).nonzero()[0]) + 1
            raise AssertionError(f"{name}: distance {k} gets bucket {int(b[k])}, below distance {k - 1}'s "
                                 f"{int(b[k - 1])}: buckets must not decrease with the distance")
    mismatch(out, rp, cfg.bidirectional, cfg.num_buckets, cfg.max_distance, "logarithmic buckets")


def check_clamp(target, cfg):
    """Every distance >= max_distance (just at it, a little over, 10x, 10^6) shares the last bucket
    of its half."""
    half = cfg.num_buckets // 2 if cfg.bidirectional else cfg.num_buckets
    md = cfg.max_distance
    dists = torch.tensor([md, md + 1, 2 * md + 1, 10 * md, 10 ** 6])
    sides = [(-dists, half - 1, "past")] + ([(dists, 2 * half - 1, "future")] if cfg.bidirectional else [])
    for rp, last, name in sides:
        out = call_bucket(target, rp.to(target.device), cfg.bidirectional, cfg.num_buckets, md)
        if bool((out != last).any()):
            k = int((out != last).nonzero()[0])
            raise AssertionError(f"{name} relative position {int(rp[k])} (|.| >= max_distance = {md}) gets bucket "
                                 f"{int(out[k])}; every distance past max_distance shares the last bucket {last}")


def check_mesh_tf(target, cfg):
    """Equals the Mesh TensorFlow formula for every relative position in -300 .. 300, both modes,
    for the drawn (num_buckets, max_distance) and T5's (32, 128) among six fixed ones."""
    rp = torch.arange(-300, 301)
    drawn = (cfg.num_buckets, cfg.max_distance)
    for nb, md in sorted({drawn, *unverified(target, "mesh_tf", MESH_TF_GRID)}):
        for bidirectional in (True, False):
            out = call_bucket(target, rp.to(target.device), bidirectional, nb, md)
            mismatch(out, rp, bidirectional, nb, md, "Mesh TF formula")
        verified(target, "mesh_tf", (nb, md))


@given(cfg=t5_bucket_configs())
def test_range(target, cfg):
    run(target, check_range, cfg)


@given(cfg=t5_bucket_configs())
def test_relative_only(target, cfg):
    run(target, check_relative_only, cfg)


@given(cfg=t5_bucket_configs(bidirectional=st.just(True)))
def test_bidirectional_halves(target, cfg):
    run(target, check_bidirectional_halves, cfg)


@given(cfg=t5_bucket_configs(bidirectional=st.just(False)))
def test_causal_future(target, cfg):
    run(target, check_causal_future, cfg)


@given(cfg=t5_bucket_configs())
def test_exact_then_log(target, cfg):
    run(target, check_exact_then_log, cfg)


@given(cfg=t5_bucket_configs())
def test_clamp(target, cfg):
    run(target, check_clamp, cfg)


@given(cfg=t5_bucket_configs())
def test_mesh_tf(target, cfg):
    run(target, check_mesh_tf, cfg)
