"""THE statistics of the harness: Student-t quantiles, mean intervals and log-log exponent fits.

Every confidence interval and every fitted exponent the bench stores, the report prints or a plot
draws comes from here, so one number has one value wherever it is shown.

- ``t_quantile(df, level)``: the two-sided Student-t critical value t_{(1+level)/2, df}, from
  ``scipy.stats.t.ppf`` (exact for every df; no table to index off by one).
- ``t_interval(xs)``: the mean of ``xs`` and its 95 % interval mean +- t_{0.975, n-1} * s / sqrt(n).
- ``fit_loglog(ns, ys, points=...)``: y = c * n^p by OLS of log y on log n. The caller states which
  sizes the fit uses (``"upper_half"`` or ``"all"``); there is no default, because a default is how
  two callers came to fit different points of the same sweep.
- ``mann_whitney_greater(xs, ys)``: the baseline gate's one-sided rank test over two points'
  repeats (``harness.verdicts.gate_rule``), with the smallest p the sample sizes allow.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict

#: the point choices ``fit_loglog`` accepts
POINTS = ("upper_half", "all")


def t_quantile(df: int, level: float = 0.95) -> float:
    """Two-sided Student-t critical value for ``df`` >= 1 degrees of freedom (ValueError below)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    from scipy.stats import t  # a second's import: only when an interval is computed

    return float(t.ppf(0.5 + level / 2, df))


def t_interval(xs: list[float]) -> tuple[float, list[float] | None]:
    """Mean and its 95 % Student-t interval [lo, hi] (None for fewer than 2 values)."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, None
    half = t_quantile(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return m, [m - half, m + half]


def upper_half(ns: list[float], min_points: int = 3) -> list[float]:
    """The upper half of the distinct sizes (>= the median; at least ``min_points`` when there are)."""
    sizes = sorted(set(ns))
    k = max(min(min_points, len(sizes)), len(sizes) - len(sizes) // 2)
    return sizes[len(sizes) - k:]


def fit_loglog(ns, ys, *, points: str) -> dict | None:
    """Fit y = c * n^p over the chosen sizes; {"exponent", "ci95", "n_range", "points", "coef"} or None.

    ``points``: ``"upper_half"`` (the small sizes of a sweep measure overheads -- launches, Python,
    allocation -- not the asymptotic cost) or ``"all"``. Pairs with a missing, non-positive or
    non-finite n or y are dropped; several ys at one n are reduced to their (upper) median first. None with
    fewer than 2 distinct sizes. ``ci95`` is slope +- t_{0.975, k-2} * SE over the k fitted sizes
    (SE = sqrt(SSR / (k - 2) / Sxx)); None with k = 2, where the slope is exact.
    """
    if points not in POINTS:
        raise ValueError(f"points must be one of {POINTS}, got {points!r}")
    by_n: dict[float, list[float]] = defaultdict(list)
    for n, y in zip(ns, ys):
        if _positive(n) and _positive(y):
            by_n[float(n)].append(float(y))
    if len(by_n) < 2:
        return None
    keep = upper_half(list(by_n)) if points == "upper_half" else sorted(by_n)
    xs = [math.log(n) for n in keep]
    zs = [math.log(sorted(by_n[n])[len(by_n[n]) // 2]) for n in keep]
    k = len(xs)
    mx, mz = sum(xs) / k, sum(zs) / k
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (z - mz) for x, z in zip(xs, zs)) / sxx
    intercept = mz - slope * mx
    ci = None
    if k > 2:
        ssr = sum((z - (intercept + slope * x)) ** 2 for x, z in zip(xs, zs))
        half = t_quantile(k - 2) * math.sqrt(ssr / (k - 2) / sxx)
        ci = [slope - half, slope + half]
    return {"exponent": slope, "ci95": ci, "n_range": [int(keep[0]), int(keep[-1])],
            "points": k, "coef": math.exp(intercept)}


def _positive(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        return False


def mann_whitney_greater(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """One-sided Mann-Whitney U test that ``xs`` tend to be larger than ``ys`` (scipy's, exact for
    small samples without ties): (p, the smallest p these sample sizes can give, 1 / C(n+m, n)).
    None when either sample is empty."""
    if not xs or not ys:
        return None
    from scipy.stats import mannwhitneyu  # only when a gate compares stored repeats

    p = float(mannwhitneyu(xs, ys, alternative="greater").pvalue)
    return p, 1.0 / math.comb(len(xs) + len(ys), len(xs))
