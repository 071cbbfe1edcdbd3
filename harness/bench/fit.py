"""Log-log exponent fits: time ~ c * n^p, fitted over the upper half of a sweep.

The small sizes of a sweep measure overheads (launches, Python, allocation), not
the asymptotic cost, so the fit uses the upper half of the distinct sizes (those
>= the median size; at least 3 points when the sweep has them). ``p`` is the OLS
slope of log t on log n; its 95 % confidence interval is slope +- t_{0.975, k-2} * SE
(Student's t with k - 2 degrees of freedom, SE = sqrt(SSR / (k - 2) / Sxx)).
With only 2 points the slope is exact and the interval is None.
"""
from __future__ import annotations

import math
from collections import defaultdict

# Student's t 0.975 quantiles for 1..30 degrees of freedom
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t_quantile_975(df: int) -> float:
    """Two-sided 95 % Student-t critical value (table, then a Cornish-Fisher expansion)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def upper_half(ns: list[float], min_points: int = 3) -> list[float]:
    sizes = sorted(set(ns))
    k = max(min(min_points, len(sizes)), len(sizes) - len(sizes) // 2)
    return sizes[len(sizes) - k:]


def fit_exponent(ns: list[float], ts: list[float], upper: bool = True) -> dict | None:
    """Fit t = c * n^p; returns {"exponent", "ci95", "n_range", "points", "coef"} or None.

    Several ``ts`` per ``n`` are reduced to their median first; non-positive or
    missing values are ignored.
    """
    by_n: dict[float, list[float]] = defaultdict(list)
    for n, t in zip(ns, ts):
        if n and t and n > 0 and t > 0 and math.isfinite(t):
            by_n[float(n)].append(float(t))
    if len(by_n) < 2:
        return None
    keep = upper_half(list(by_n)) if upper else sorted(by_n)
    xs = [math.log(n) for n in keep]
    ys = [math.log(sorted(by_n[n])[len(by_n[n]) // 2]) for n in keep]
    k = len(xs)
    mx, my = sum(xs) / k, sum(ys) / k
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    ci = None
    if k > 2:
        ssr = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys))
        se = math.sqrt(ssr / (k - 2) / sxx)
        half = t_quantile_975(k - 2) * se
        ci = [slope - half, slope + half]
    return {"exponent": slope, "ci95": ci, "n_range": [int(keep[0]), int(keep[-1])],
            "points": k, "coef": math.exp(intercept)}


def fits_from_rows(rows: list[dict], suite: str = "scaling", x: str = "n",
                   y: str = "time_s") -> dict[str, dict]:
    """``fits.json``: one fit per case of ``suite`` over its ok rows (keyed "suite|case").

    Rows of one case that differ in other parameters (batch, heads, ...) are fitted
    separately, keyed "suite|case|param=value,...", when there is more than one group.
    """
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("suite") != suite or r.get("status") != "ok":
            continue
        params = {k: v for k, v in (r.get("params") or {}).items() if k != x}
        tag = ",".join(f"{k}={params[k]}" for k in sorted(params))
        groups[(r["case"], tag)].append(r)
    tags_per_case: dict[str, set] = defaultdict(set)
    for case, tag in groups:
        tags_per_case[case].add(tag)
    out: dict[str, dict] = {}
    for (case, tag), rs in sorted(groups.items()):
        f = fit_exponent([r["params"].get(x) for r in rs], [(r.get("metrics") or {}).get(y) for r in rs])
        if f is None:
            continue
        key = f"{suite}|{case}" if len(tags_per_case[case]) == 1 else f"{suite}|{case}|{tag}"
        out[key] = f
    return out
