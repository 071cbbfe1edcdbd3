"""Log-log scaling exponent: ordinary least squares of log(y) on log(n), 95 % CI from Student's t.

Used by the plots when a run has no ``fits.json`` entry (or for metrics fits.json does not cover).
Returns the same shape as fits.json entries: ``{"exponent", "ci95": [lo, hi], "n_range": [lo, hi]}``.
"""
from __future__ import annotations

import math

import numpy as np

# two-sided 95 % quantiles of Student's t, by degrees of freedom
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000,
        120: 1.980}


def t95(dof: int) -> float:
    if dof <= 0:
        return math.inf
    best = max(d for d in _T95 if d <= dof) if dof <= 120 else None
    return _T95[best] if best is not None else 1.960


def fit_loglog(n, y) -> dict | None:
    """Exponent k of y ~ c * n**k over the positive, finite points; None with < 2 distinct n."""
    n = np.asarray(n, dtype=float)
    y = np.asarray(y, dtype=float)
    keep = np.isfinite(n) & np.isfinite(y) & (n > 0) & (y > 0)
    n, y = n[keep], y[keep]
    if len(np.unique(n)) < 2:
        return None
    x, z = np.log(n), np.log(y)
    xm = x - x.mean()
    sxx = float((xm ** 2).sum())
    slope = float((xm * (z - z.mean())).sum() / sxx)
    dof = len(x) - 2
    if dof > 0:
        resid = z - (z.mean() + slope * xm)
        se = math.sqrt(float((resid ** 2).sum()) / dof / sxx)
        half = t95(dof) * se
        ci = [slope - half, slope + half]
    else:
        ci = [math.nan, math.nan]
    return {"exponent": slope, "ci95": ci, "n_range": [float(n.min()), float(n.max())]}


def label(fit: dict | None) -> str:
    if not fit or fit.get("exponent") is None:
        return ""
    lo, hi = (fit.get("ci95") or [math.nan, math.nan])[:2]
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None and math.isfinite(lo) \
        and math.isfinite(hi) else ""
    return f"k={fit['exponent']:.2f}{ci}"
