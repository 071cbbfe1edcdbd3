"""Sliding-window attention conformance.

Protocol: queries aligned to the end of the keys; the query at absolute
position i sees exactly the keys j with i - window < j <= i (``w`` keys).
FlashAttention's window_size=(w, 0) and attention-gym see i - w <= j <= i
(``w+1`` keys): a named convention, measured by a one-hot value probe.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given

from harness.spec import tolerance
from harness.suites import regimes
from harness.suites.attention.configs import window_configs
from harness.suites.regimes import covering
from harness.suites.kit import KNOWN, check_convention, expect_tensor, impl, record_label, run
from harness.reference.masks import window_mask
from harness.reference.sliding_window import sliding_window_math
from harness.suites.attention.helpers import poison, probe_inputs, seen_keys, show_mask

PROPERTY_PREFIX = "sliding_window"
SWA = "sliding_window_attention"
pytestmark = pytest.mark.needs(SWA)


def call_swa(target, q, k, v, window, **kw):
    out = impl(target, SWA)(q, k, v, window, **kw)
    return expect_tensor(out, SWA, (*q.shape[:-1], v.shape[-1]), q.dtype, q.device)


def measure_extent(target, cfg) -> tuple[str | None, torch.Tensor]:
    """Which keys each query sees: Q = K = 0 gives equal scores, V = identity reads them out."""
    q, k, v = probe_inputs(cfg, target.device)
    vis = seen_keys(call_swa(target, q, k, v, cfg.window), cfg.S)
    for extent in KNOWN["window_extent"].values:
        if bool((vis == window_mask(cfg.L, cfg.S, cfg.window, extent, device=target.device)).all()):
            return extent, vis
    return None, vis


def _declared_extent(target) -> str:
    return target.conventions.get("window_extent", KNOWN["window_extent"].default)


def check_window_extent(target, cfg):
    """The one-hot probe measures exactly which keys each query sees, for window < L,
    window >= L and window = 1; the extent (w or w+1 keys) is named."""
    declared = _declared_extent(target)
    informative = set()
    for probe in (cfg, replace(cfg, window=1), replace(cfg, window=cfg.S + 1)):
        extent, vis = measure_extent(target, probe)
        if extent is None:
            expected = window_mask(probe.L, probe.S, probe.window, declared)
            check_convention("window_extent", None, target.conventions,
                             f"\n  window={probe.window}, L={probe.L}, S={probe.S}; measured:"
                             f"{show_mask(vis.reshape(-1, probe.L, probe.S)[0].cpu())}"
                             f"\n  expected ({declared}):{show_mask(expected)}")
        w, w1 = (window_mask(probe.L, probe.S, probe.window, e) for e in ("w", "w+1"))
        no_window = window_mask(probe.L, probe.S, probe.S, "w")  # every key up to the query
        # only probes where the two extents differ tell them apart, and w+1 only where it is not
        # also "no window at all" (there a kernel that skips the window looks like w+1)
        if not bool((w == w1).all()) and not (extent == "w+1" and bool((w1 == no_window).all())):
            informative.add(extent)
    # two different extents for different windows is no convention at all
    measured = informative.pop() if len(informative) == 1 else None if informative else declared
    record_label(target, check_convention("window_extent", measured, target.conventions))


def check_window_agreement(target, cfg):
    """Random inputs equal the float64 sliding-window reference (with the declared extent)."""
    extent = _declared_extent(target)
    q, k, v = cfg.qkv(target.device)
    out = call_swa(target, q, k, v, cfg.window)
    ref = sliding_window_math(q.cpu(), k.cpu(), v.cpu(), cfg.window, extent=extent)
    naive = sliding_window_math(q.cpu(), k.cpu(), v.cpu(), cfg.window, extent=extent, compute_dtype=q.dtype)
    tolerance.assert_close(out, ref, naive, dtype=q.dtype,
                           what=f"sliding window (window={cfg.window}, extent {extent})")


def check_outside_window(target, cfg):
    """Keys outside every query's window, even at +-1e4, have no influence (raw scores capped at a quarter of
    the dtype's max, so float16 tests the mask, not an overflow); an explicit scale is honoured."""
    extent = _declared_extent(target)
    vis = window_mask(cfg.L, cfg.S, cfg.window, extent)
    outside = ~vis.any(dim=0)  # keys no query sees
    q, k, v = cfg.qkv(target.device)
    scale = 0.5
    out = call_swa(target, q, k, v, cfg.window, scale=scale)
    ref = sliding_window_math(q.cpu(), k.cpu(), v.cpu(), cfg.window, scale=scale, extent=extent)
    naive = sliding_window_math(q.cpu(), k.cpu(), v.cpu(), cfg.window, scale=scale, extent=extent,
                                compute_dtype=q.dtype)
    cmp = tolerance.assert_close(out, ref, naive, dtype=q.dtype, what="with scale=0.5")
    if outside.any():
        o = outside.to(target.device)
        # +-1e4, the raw scores capped at a quarter of the dtype's max (as the mask suite does): in
        # float16 q.k reaches 7e4, and an inf before masking tests overflow, not the window
        k2, v2 = poison(q, k, v, o, cfg.generator(salt=8), scale=scale)
        out2 = call_swa(target, q, k2, v2, cfg.window, scale=scale)
        diff = float((out2.double() - out.double()).abs().nan_to_num(float("inf")).max())
        if diff > 2 * cmp.allowed:
            raise AssertionError(f"keys {o.nonzero().flatten().tolist()} lie outside every window, but "
                                 f"setting them to +-1e4 changed the output by {diff:.3e}")


@given(cfg=window_configs())
@covering(regimes.WINDOW)
def test_window_extent(target, cfg):
    run(target, check_window_extent, cfg)


@given(cfg=window_configs())
@covering(regimes.WINDOW)
def test_window_agreement(target, cfg):
    run(target, check_window_agreement, cfg)


@given(cfg=window_configs())
@covering(regimes.WINDOW)
def test_outside_window(target, cfg):
    run(target, check_outside_window, cfg)
