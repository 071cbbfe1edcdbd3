"""Sinusoidal position embedding conformance (Vaswani et al. 2017).

    PE(m, 2i) = sin(m w_i),  PE(m, 2i+1) = cos(m w_i),  w_i = 10000^(-2i/d)
    <PE_m, PE_n> = sum_i cos(w_i (m - n))           (the seed's derivation)

The column order is a named convention (``sinusoidal_layout``), read off PE(0):
[0, 1, 0, 1, ...] is the paper's interleaved layout (the default), [0 ... 0, 1 ... 1]
the concatenated one (tensor2tensor, fairseq), which a target must declare.

What "falls off with distance" means precisely (the seed states it loosely): every
term cos(w_i k) decreases while w_i k <= pi, and w_i <= 1, so the inner product is
strictly decreasing for |m - n| <= 3; it equals d/2 at m = n and is below d/2 for
every other integer distance (cos(k) < 1 for k != 0); beyond |m - n| = 3 the w_0 = 1
term turns back up and the sum oscillates, so no monotone claim is made there.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.spec import tolerance
from harness.suites.positions.configs import sinusoidal_configs
from harness.suites.kit import check_convention, impl, record_label, run
from harness.reference.sinusoidal import LAYOUTS, sin_cos_columns, sinusoidal_frequencies, sinusoidal_math
from harness.suites.positions.helpers import expect_floating

PROPERTY_PREFIX = "sinusoidal"
SIN = "sinusoidal_position_embedding"
pytestmark = pytest.mark.needs(SIN)


def call_pe(target, num_positions: int, dim: int) -> torch.Tensor:
    """The target's table (num_positions, dim), on the CPU in its own dtype."""
    return expect_floating(impl(target, SIN)(num_positions, dim), SIN, (num_positions, dim))


def truth(N, d, layout, start=0):
    return sinusoidal_math(N, d, layout, start=start)


def naive(N, d, layout, dtype, start=0):
    return sinusoidal_math(N, d, layout, compute_dtype=dtype, start=start)


def table_layout(target, cfg, record: bool = False) -> str:
    """Read the layout off PE(0) (sin 0 = 0 in the sin columns, cos 0 = 1 in the cos columns)."""
    row0 = call_pe(target, 1, cfg.dim)[0]
    matching = [lay for lay in LAYOUTS
                if tolerance.compare(row0, truth(1, cfg.dim, lay)[0], dtype=row0.dtype).ok]
    preferred = target.conventions.get("sinusoidal_layout", "interleaved")  # d = 2: both coincide
    measured = preferred if preferred in matching else (matching[0] if matching else None)
    shown = ", ".join(f"{v:.3g}" for v in row0[:12].tolist()) + (" ..." if cfg.dim > 12 else "")
    label = check_convention("sinusoidal_layout", measured, target.conventions,
                             f"\n  PE(0) = [{shown}]; interleaved is [0, 1, 0, 1, ...], "
                             f"concatenated [0, ..., 0, 1, ..., 1]")
    if record:
        record_label(target, label)
    return measured


def check_origin(target, cfg):
    """PE(0) is [0, 1, 0, 1, ...] (sin 0, cos 0 per pair) under the interleaved layout, or
    [0 ... 0, 1 ... 1] under the concatenated one, which is named."""
    table_layout(target, cfg, record=True)


def check_relative_inner_product(target, cfg):
    """<PE_m, PE_n> depends only on m - n: every diagonal of the Gram matrix is constant
    (layout-free)."""
    N, d = cfg.num_positions, cfg.dim
    pe = call_pe(target, N, d)
    gram = pe.double() @ pe.double().T  # (N, N)
    lay = target.conventions.get("sinusoidal_layout", "interleaved")
    pe_truth, pe_naive = truth(N, d, lay), naive(N, d, lay, pe.dtype).double()
    g_naive = pe_naive @ pe_naive.T  # the Gram matrix is layout-free; the layout only builds the tables
    allowed = tolerance.allowance(pe_truth @ pe_truth.T, g_naive, dtype=pe.dtype)
    m, n = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    # the same distance n - m at the first row (n >= m) or the first column (n < m)
    first = torch.where(n >= m, gram[0].index_select(0, (n - m).clamp_min(0).flatten()).view(N, N),
                        gram[:, 0].index_select(0, (m - n).clamp_min(0).flatten()).view(N, N))
    diff = (gram - first).abs().nan_to_num(float("inf"))
    if float(diff.max()) > 2 * allowed:
        i, j = (int(v) for v in (diff == diff.max()).nonzero()[0])
        ref = (0, j - i) if j >= i else (i - j, 0)
        raise AssertionError(f"<PE_{i}, PE_{j}> = {gram[i, j]:.6g} but <PE_{ref[0]}, PE_{ref[1]}> = "
                             f"{gram[ref]:.6g} at the same distance {j - i} (differ by {diff.max():.3e}, "
                             f"allowed {2 * allowed:.3e}): not a function of m - n")


def check_closeness(target, cfg):
    """Per frequency pair, sin(m w) sin(n w) + cos(m w) cos(n w) is 1 at m = n, never above it
    and non-increasing for |m - n| <= 3; summed: <PE_m, PE_m> = d/2 is the maximum, every
    other distance (< 64) is below it, and |m - n| = 0, 1, 2, 3 is strictly decreasing."""
    layout = table_layout(target, cfg)
    N, d = max(cfg.num_positions, 5), cfg.dim
    pe = call_pe(target, N, d)
    s_col, c_col = sin_cos_columns(d, layout)

    def pair_terms(t):  # (N, N, d/2): each pair's contribution to <PE_m, PE_n>
        t = t.double()
        return t[:, None, s_col] * t[None, :, s_col] + t[:, None, c_col] * t[None, :, c_col]

    terms, t_naive = pair_terms(pe), pair_terms(naive(N, d, layout, pe.dtype))
    slack = tolerance.allowance(pair_terms(truth(N, d, layout)), t_naive, dtype=pe.dtype)
    gram = terms.sum(-1)
    diag = torch.diagonal(terms).T  # (N, d/2)
    dev = (diag - 1).abs()
    if float(dev.max()) > slack:
        m, i = (int(v) for v in (dev == dev.max()).nonzero()[0])
        raise AssertionError(f"pair {i} contributes {diag[m, i]:.6g} to <PE_{m}, PE_{m}>; sin^2 + cos^2 "
                             f"must be 1 (so <PE_m, PE_m> = d/2 = {d / 2:g})")
    if float(terms.max()) > 1 + slack:
        m, n, i = (int(v) for v in (terms == terms.max()).nonzero()[0])
        raise AssertionError(f"pair {i} contributes {terms[m, n, i]:.6g} > 1 to <PE_{m}, PE_{n}>: "
                             f"above its value at m = n")
    for k in range(1, 4):
        a, b = torch.diagonal(terms, k - 1)[..., : N - k], torch.diagonal(terms, k)  # (d/2, N - k)
        if float((b - a).max()) > 2 * slack:
            i, m = (int(v) for v in ((b - a) == (b - a).max()).nonzero()[0])
            raise AssertionError(f"pair {i}: its term at distance {k} ({b[i, m]:.6g}) exceeds the one at "
                                 f"distance {k - 1} ({a[i, m]:.6g}) from m = {m}; cos(w_i k) decreases "
                                 f"for k <= 3 since every w_i <= 1")
        ga, gb = torch.diagonal(gram, k - 1)[: N - k], torch.diagonal(gram, k)
        if not bool((gb < ga - 2 * slack * d).all()):
            m = int((gb >= ga - 2 * slack * d).nonzero()[0])
            raise AssertionError(f"<PE_{m}, PE_{m + k}> = {gb[m]:.6g} is not below <PE_{m}, PE_{m + k - 1}> = "
                                 f"{ga[m]:.6g}: the inner product must fall for |m - n| <= 3")
    off = gram.masked_fill(torch.eye(N, dtype=torch.bool), float("-inf"))
    if float(off.max()) >= d / 2 - slack:
        m, n = (int(v) for v in (off == off.max()).nonzero()[0])
        raise AssertionError(f"<PE_{m}, PE_{n}> = {gram[m, n]:.6g} reaches the maximum d/2 = {d / 2:g} at "
                             f"distance {n - m} != 0")


def check_frequencies(target, cfg):
    """The frequency of each (sin, cos) column pair, read off PE(1) as atan2(sin, cos), equals
    w_i = 10000^(-2i/d) in pair order."""
    layout = table_layout(target, cfg)
    d = cfg.dim
    pe = call_pe(target, 2, d)
    s_col, c_col = sin_cos_columns(d, layout)
    got = torch.atan2(pe[1, s_col].double(), pe[1, c_col].double())
    nai = naive(2, d, layout, pe.dtype).double()
    expected = sinusoidal_frequencies(d)[: d // 2]
    try:
        tolerance.assert_close(got, expected, torch.atan2(nai[1, s_col], nai[1, c_col]), dtype=pe.dtype,
                               what="the frequencies w_i")
    except AssertionError as exc:
        shown = ", ".join(f"{g:.4g} (expected {e:.4g})" for g, e in zip(got[:8].tolist(), expected[:8].tolist()))
        raise AssertionError(f"{exc}\n  w_i recovered from PE(1), {layout} columns: {shown}"
                             f"{' ...' if d > 16 else ''}") from None


def check_extrapolation(target, cfg):
    """Positions never seen at num_positions exist: a table of ``far`` rows (1025 or 2048)
    starts with the num_positions-row table, and its last 64 rows follow the formula."""
    layout = table_layout(target, cfg)
    N, d, far = cfg.num_positions, cfg.dim, cfg.far
    short, long = call_pe(target, N, d), call_pe(target, far, d)
    tail = long[far - 64:]
    tolerance.assert_close(tail, truth(64, d, layout, start=far - 64), naive(64, d, layout, long.dtype, far - 64),
                           what=f"rows {far - 64} .. {far - 1} of the {far}-row table")
    tolerance.assert_close(long[:N], truth(N, d, layout), naive(N, d, layout, long.dtype),
                           what=f"the first {N} rows of the {far}-row table")
    tolerance.assert_close(short, long[:N].double(), naive(N, d, layout, short.dtype),
                           what=f"the {N}-row table against the first {N} rows of the {far}-row table")


@given(cfg=sinusoidal_configs())
def test_origin(target, cfg):
    run(target, check_origin, cfg)


@given(cfg=sinusoidal_configs())
def test_relative_inner_product(target, cfg):
    run(target, check_relative_inner_product, cfg)


@given(cfg=sinusoidal_configs())
def test_closeness(target, cfg):
    run(target, check_closeness, cfg)


@given(cfg=sinusoidal_configs())
def test_frequencies(target, cfg):
    run(target, check_frequencies, cfg)


@given(cfg=sinusoidal_configs())
def test_extrapolation(target, cfg):
    run(target, check_extrapolation, cfg)
