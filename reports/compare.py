"""Baseline comparison: per (key, metric), current vs baseline, with a noise-aware threshold.

- Metrics with a direction (``DIRECTION``): ``ratio = current / baseline``. The allowed relative change
  is ``tol = max(floor, K_SPREAD * baseline's relative spread)``, the floor being ``FLOOR[metric]``, or
  for time-derived metrics ``TIME_FLOOR[device kind]`` (25 % CPU, 10 % GPU); the spread of a time-derived
  metric (time_s, tflops, tokens_per_s) is ``time_iqr_s / time_s``, that of accuracy the half width of its
  95 % CI over the accuracy; memory has no spread, only the floor. Lower-is-better regresses when
  ``ratio > 1 + tol``, higher-is-better when ``ratio < 1 / (1 + tol)`` (the mirror image in log space).
- Machine drift: a shared or throttled machine runs everything some percent slower or faster from
  one run to the next, which no within-run spread shows. Per (run, suite, device kind) with at
  least ``DRIFT_MIN_POINTS`` timed points, the drift ``d`` is the median of the ``time_s`` ratios.
  Time-derived metrics are judged on ``ratio / d`` (``ratio * d`` for higher-is-better), so one
  kernel that got slower relative to its peers is a regression whatever the machine's mood; and the
  drift itself is one row per suite (metric ``time_s:suite_median``), a regression when
  ``d > 1 + TIME_FLOOR[device kind]`` (everything slower: 25 % on a CPU, 10 % on a GPU).
- CPU memory (RSS high-water mark deltas) moves by allocator arenas and pages: it is allowed
  ``MEM_SLACK_CPU`` bytes beyond the relative floor. CUDA's counters are exact: the floor alone.
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
FLOOR = {"peak_mem_bytes": 0.05,
         "cache_bytes": 0.0, "accuracy": 0.02}
K_SPREAD = 2.0
TIME_DERIVED = ("time_s", "tflops", "tokens_per_s")
#: time-derived floors by device kind: between two runs on a shared CPU machine a kernel's median
#: moves by up to ~20 % net of the suite's drift (measured here, 2-core VM), far beyond its
#: within-run IQR; CUDA events on a dedicated GPU repeat to a few percent
TIME_FLOOR = {"cpu": 0.25, "cuda": 0.10}
DRIFT_MIN_POINTS = 4
MEM_SLACK_CPU = 8 * 2 ** 20
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
                               "status": row.status, "reason": row.reason, "metrics": {},
                               "device": device_kind(row.device)})
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


def device_kind(device) -> str:
    return "cuda" if str(device).startswith("cuda") else "cpu"


def tolerance(metric: str, baseline_metrics: dict, device: str = "cpu") -> float:
    floor = TIME_FLOOR[device_kind(device)] if metric in TIME_DERIVED else FLOOR.get(metric, 0.10)
    tol = max(floor, K_SPREAD * relative_spread(metric, baseline_metrics))
    base = baseline_metrics.get(metric)
    if metric == "peak_mem_bytes" and device_kind(device) == "cpu" and base:
        tol = max(tol, MEM_SLACK_CPU / base)
    return tol


def drift(pairs: list[tuple[dict, dict]]) -> float | None:
    """The median ``time_s`` ratio current / baseline over (baseline, current) point pairs
    (None with fewer than ``DRIFT_MIN_POINTS`` timed pairs: no drift is taken out)."""
    ratios = sorted(c["metrics"]["time_s"] / b["metrics"]["time_s"] for b, c in pairs
                    if b["metrics"].get("time_s") and c["metrics"].get("time_s"))
    if len(ratios) < DRIFT_MIN_POINTS:
        return None
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else math.sqrt(ratios[mid - 1] * ratios[mid])


def _matches(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _metric_rows(base: dict, cur: dict, d: float = 1.0) -> list[dict]:
    rows = []
    bm, cm = base["metrics"], cur["metrics"]
    for metric, direction in DIRECTION.items():
        if metric not in bm or metric not in cm:
            continue
        b, c = bm[metric], cm[metric]
        tol = tolerance(metric, bm, cur.get("device", "cpu"))
        ratio = c / b if b else (1.0 if c == b else math.inf)
        # time-derived metrics are judged net of the suite's drift (time_s: / d; rates: * d)
        net = ratio if metric not in TIME_DERIVED else ratio / d if direction == "lower" else ratio * d
        worse = net > 1 + tol if direction == "lower" else net < 1 / (1 + tol)
        better = net < 1 / (1 + tol) if direction == "lower" else net > 1 + tol
        if b == 0 and c == 0:
            worse = better = False
        elif b == 0:
            worse, better = (c > 0, False) if direction == "lower" else (False, c > 0)
        note = f"{'+' if ratio >= 1 else ''}{(ratio - 1) * 100:.1f}% (allowed {tol * 100:.0f}%)" \
            if math.isfinite(ratio) else ""
        if note and net != ratio:
            note += f"; {'+' if net >= 1 else ''}{(net - 1) * 100:.1f}% net of the suite's drift x{d:.3f}"
        rows.append({"metric": metric, "direction": direction, "baseline": b, "current": c,
                     "ratio": ratio, "allowed": tol,
                     "verdict": "regression" if worse else "improvement" if better else "ok",
                     "note": note})
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
    groups: dict[tuple[str, str, str], list] = {}
    for (run_id, key), cur in cur_points.items():
        base = base_points.get(key)
        if base is not None and base["status"] == cur["status"] == "ok":
            groups.setdefault((run_id, cur["suite"], cur["device"]), []).append((base, cur))
    drifts = {g: d for g, pairs in groups.items() if (d := drift(pairs)) is not None}
    for (run_id, suite, kind), d in drifts.items():
        floor = TIME_FLOOR[kind]
        verdict = "regression" if d > 1 + floor else "improvement" if d < 1 / (1 + floor) else "ok"
        machine = groups[(run_id, suite, kind)][0][1]["machine"]
        rows.append({"run_id": run_id, "machine": machine, "key": f"{suite}|*", "suite": suite, "case": "*",
                     "metric": "time_s:suite_median", "direction": "lower", "baseline": 1.0, "current": d,
                     "ratio": d, "allowed": floor, "verdict": verdict,
                     "note": f"every {suite} point {'+' if d >= 1 else ''}{(d - 1) * 100:.1f}% (median; "
                             f"allowed {floor * 100:.0f}% on {kind}): the machine's drift, taken out of "
                             f"each point's time comparison"})
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
            d = drifts.get((run_id, cur["suite"], cur["device"]), 1.0)
            rows += [{**head, **r} for r in _metric_rows(base, cur, d)]
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
