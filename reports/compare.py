"""Baseline comparison: per (key, metric), current vs baseline, with a noise-aware threshold.

- Metrics with a direction (``DIRECTION``): ``ratio = current / baseline``. The allowed relative change
  is ``tol = max(FLOOR[metric], K_SPREAD * baseline's relative spread)``; the spread of a time-derived
  metric (time_s, tflops, tokens_per_s) is ``time_iqr_s / time_s``, that of accuracy the half width of its
  95 % CI over the accuracy; memory has no spread, only the floor. Lower-is-better regresses when
  ``ratio > 1 + tol``, higher-is-better when ``ratio < 1 / (1 + tol)`` (the mirror image in log space).
- Exact-match pairs (``EXACT``): a measured value that equalled its formula in the baseline and does not
  now is a regression.
- Status: a point ``ok`` in the baseline and ``oom``/``error``/``nan`` now is a regression. Other status
  changes are reported (``skipped``, ``fixed``, ``still failing``), and so are points only in one side
  (``new``, ``missing``); none of them is a regression.

Exit code: ``exit_code(table)`` is 1 when any row's verdict is ``regression``, else 0.
"""
from __future__ import annotations

import math

import pandas as pd

from reports.load import BAD_STATUSES

DIRECTION = {"time_s": "lower", "peak_mem_bytes": "lower", "cache_bytes": "lower",
             "tflops": "higher", "tokens_per_s": "higher", "accuracy": "higher"}
FLOOR = {"time_s": 0.10, "tflops": 0.10, "tokens_per_s": 0.10, "peak_mem_bytes": 0.05,
         "cache_bytes": 0.0, "accuracy": 0.02}
K_SPREAD = 2.0
TIME_DERIVED = ("time_s", "tflops", "tokens_per_s")
EXACT = {"receptive_field": "formula", "cache_bytes": "cache_formula_bytes"}
CI_NAMES = [("accuracy_ci95_lo", "accuracy_ci95_hi"), ("ci95_lo", "ci95_hi"),
            ("ci95_low", "ci95_high"), ("accuracy_ci95_low", "accuracy_ci95_high")]
COLUMNS = ["run_id", "machine", "key", "suite", "case", "metric", "direction", "baseline", "current",
           "ratio", "allowed", "verdict", "note"]


def _points(df: pd.DataFrame) -> dict[tuple[str, str], dict]:
    """(run_id, key) -> {suite, case, machine, status, reason, metrics{}}."""
    out: dict[tuple[str, str], dict] = {}
    for row in df.itertuples(index=False):
        k = (row.run_id, row.key)
        p = out.setdefault(k, {"suite": row.suite, "case": row.case, "machine": row.machine,
                               "status": row.status, "reason": row.reason, "metrics": {}})
        if not pd.isna(row.metric) and not pd.isna(row.value):
            p["metrics"][row.metric] = float(row.value)
    return out


def ci_halfwidth(metrics: dict) -> float | None:
    for lo, hi in CI_NAMES:
        if lo in metrics and hi in metrics:
            return (metrics[hi] - metrics[lo]) / 2
    return None


def relative_spread(metric: str, m: dict) -> float:
    if metric in TIME_DERIVED and m.get("time_iqr_s") is not None and m.get("time_s"):
        return abs(m["time_iqr_s"] / m["time_s"])
    if metric == "accuracy" and m.get("accuracy"):
        half = ci_halfwidth(m)
        return abs(half / m["accuracy"]) if half is not None else 0.0
    return 0.0


def tolerance(metric: str, baseline_metrics: dict) -> float:
    return max(FLOOR.get(metric, 0.10), K_SPREAD * relative_spread(metric, baseline_metrics))


def _matches(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _metric_rows(base: dict, cur: dict) -> list[dict]:
    rows = []
    bm, cm = base["metrics"], cur["metrics"]
    for metric, direction in DIRECTION.items():
        if metric not in bm or metric not in cm:
            continue
        b, c = bm[metric], cm[metric]
        tol = tolerance(metric, bm)
        ratio = c / b if b else (1.0 if c == b else math.inf)
        worse = ratio > 1 + tol if direction == "lower" else ratio < 1 / (1 + tol)
        better = ratio < 1 / (1 + tol) if direction == "lower" else ratio > 1 + tol
        if b == 0 and c == 0:
            worse = better = False
        elif b == 0:
            worse, better = (c > 0, False) if direction == "lower" else (False, c > 0)
        rows.append({"metric": metric, "direction": direction, "baseline": b, "current": c,
                     "ratio": ratio, "allowed": tol,
                     "verdict": "regression" if worse else "improvement" if better else "ok",
                     "note": f"{'+' if ratio >= 1 else ''}{(ratio - 1) * 100:.1f}% (allowed {tol * 100:.0f}%)"
                     if math.isfinite(ratio) else ""})
    for measured, formula in EXACT.items():
        if not all(m in d for m in (measured, formula) for d in (bm, cm)):
            continue
        was, now = _matches(bm[measured], bm[formula]), _matches(cm[measured], cm[formula])
        verdict = ("regression" if was and not now else "fixed" if now and not was
                   else "ok" if now else "mismatch")
        rows.append({"metric": f"{measured}=={formula}", "direction": "exact", "baseline": bm[measured],
                     "current": cm[measured], "ratio": math.nan, "allowed": 0.0, "verdict": verdict,
                     "note": f"{formula}: baseline {bm[formula]:.6g}, now {cm[formula]:.6g}"})
    return rows


def _status_row(base: dict, cur: dict) -> dict | None:
    b, c = base["status"], cur["status"]
    if b == c == "ok":
        return None
    if b == "ok" and c in BAD_STATUSES:
        verdict = "regression"
    elif b == "ok":
        verdict = c  # e.g. "skipped"
    elif c == "ok":
        verdict = "fixed"
    else:
        verdict = "still failing" if c in BAD_STATUSES else c
    reason = cur["reason"] if not pd.isna(cur["reason"]) else ""
    return {"metric": "status", "direction": "", "baseline": math.nan, "current": math.nan,
            "ratio": math.nan, "allowed": math.nan, "verdict": verdict,
            "note": f"{b} -> {c}" + (f": {reason}" if reason else "")}


def compare(current: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """One row per compared (run, key, metric) plus status changes and new/missing points."""
    base_points = {key: p for (_, key), p in _points(baseline).items()}
    cur_points = _points(current)
    rows = []
    for (run_id, key), cur in cur_points.items():
        head = {"run_id": run_id, "machine": cur["machine"], "key": key, "suite": cur["suite"],
                "case": cur["case"]}
        base = base_points.get(key)
        if base is None:
            rows.append({**head, "metric": "", "verdict": "new", "note": "not in the baseline"})
            continue
        status = _status_row(base, cur)
        if status:
            rows.append({**head, **status})
        if base["status"] == "ok" and cur["status"] == "ok":
            rows += [{**head, **r} for r in _metric_rows(base, cur)]
    measured = {k for _, k in cur_points}  # one job's points may lie in several run folders
    for key, base in base_points.items():
        if key not in measured:
            rows.append({"run_id": "", "machine": "", "key": key, "suite": base["suite"],
                         "case": base["case"], "metric": "", "verdict": "missing",
                         "note": "in the baseline, not in any run compared"})
    table = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("baseline", "current", "ratio", "allowed"):
        table[c] = table[c].astype("float64")
    for c in set(COLUMNS) - {"baseline", "current", "ratio", "allowed"}:
        table[c] = table[c].astype("string")
    return table


def regressions(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["verdict"] == "regression"].reset_index(drop=True)


def exit_code(table: pd.DataFrame) -> int:
    return 1 if (table["verdict"] == "regression").any() else 0


def counts(table: pd.DataFrame) -> dict[str, int]:
    return {str(k): int(v) for k, v in table["verdict"].value_counts().items()}
