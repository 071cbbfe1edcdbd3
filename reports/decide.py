"""The gate's verdict per (point, metric): thresholds from each point's own spread, and the points
it cannot decide. The rule and its constants are ``harness.verdicts.gate_rule`` (shared with the bench);
``reports.gate`` pairs the points and applies this.

- Directional metrics (``DIRECTION``): ``ratio = current / baseline``, allowed ``tol`` from
  ``tolerance`` (time-derived: ``harness.verdicts.gate_rule.detectable`` of the noisier spread; others
  ``max(FLOOR, K_SPREAD * spread)``, CPU memory also ``MEM_SLACK_CPU`` bytes). Time-derived metrics
  are judged net of the suite's drift ``d``. A time-derived point that cannot detect the gate's
  stated slowdown is "undecided (spread X %)" unless it moved beyond ``tol``; a move beyond ``tol``
  the stored repeats' rank test does not confirm is undecided too.
- CPU peak memory under the probe's resolution (either run), and a baseline of 0 bytes for a
  memory metric, are "undecided (below resolution)": 0 -> 663,552 B is not a regression (issue 27).
- Exact-match pairs (``EXACT``) and a metric with no value now: as the module doc of
  ``reports.gate`` says.
"""
from __future__ import annotations

import math

from harness.verdicts.gate_rule import (ALPHA, K_SPREAD, LEGACY_RESOLUTION_BYTES, NOISE_SIGMAS, UNDECIDED_RESOLUTION, decides,
                               detectable, device_kind, undecided_spread)
from harness.spec.stats import mann_whitney_greater

DIRECTION = {"time_s": "lower", "peak_mem_bytes": "lower", "cache_bytes": "lower",
             "tflops": "higher", "tokens_per_s": "higher", "accuracy": "higher"}
FLOOR = {"peak_mem_bytes": 0.05,
         "cache_bytes": 0.0, "accuracy": 0.02}
TIME_DERIVED = ("time_s", "tflops", "tokens_per_s")
#: metrics in bytes: a baseline of 0 is not a measurement of a computation that allocates
MEMORY = ("peak_mem_bytes", "cache_bytes")
MEM_SLACK_CPU = 8 * 2 ** 20
EXACT = {"receptive_field": "formula", "cache_bytes": "cache_formula_bytes"}
CI_NAMES = [("accuracy_ci95_lo", "accuracy_ci95_hi"), ("ci95_lo", "ci95_hi"),
            ("ci95_low", "ci95_high"), ("accuracy_ci95_low", "accuracy_ci95_high")]
SAMPLES = "time_samples_s"


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
    if metric == "peak_mem_bytes" and m.get("peak_mem_bytes") and \
            m.get("peak_mem_max_bytes") is not None and m.get("peak_mem_min_bytes") is not None:
        return abs(m["peak_mem_max_bytes"] - m["peak_mem_min_bytes"]) / m["peak_mem_bytes"]
    return 0.0


def tolerance(metric: str, baseline_metrics: dict, device: str = "cpu",
              current_metrics: dict | None = None, suite: str | None = None) -> float:
    spread = relative_spread(metric, baseline_metrics)
    if current_metrics is not None:  # the noisier of the two measurements decides
        spread = max(spread, relative_spread(metric, current_metrics))
    if metric in TIME_DERIVED:
        return detectable(spread, device, suite)
    tol = max(FLOOR.get(metric, 0.10), K_SPREAD * spread)
    base = baseline_metrics.get(metric)
    if metric == "peak_mem_bytes" and device_kind(device) == "cpu" and base:
        tol = max(tol, MEM_SLACK_CPU / base)
    return tol


def resolution(metric: str, m: dict, device) -> float | None:
    """The probe's resolution for ``m``'s value of ``metric`` (CPU peak memory: its row's
    ``peak_mem_resolution_bytes``, or ``LEGACY_RESOLUTION_BYTES`` for rows written before); None
    for every other metric."""
    if metric != "peak_mem_bytes" or device_kind(device) != "cpu":
        return None
    return m.get("peak_mem_resolution_bytes", LEGACY_RESOLUTION_BYTES)


def _below(metric: str, m: dict, r: float | None) -> bool:
    """``m``'s value is under ``r``, or was recorded as below resolution (null, with a resolution)."""
    if metric not in m:
        return "peak_mem_resolution_bytes" in m and metric == "peak_mem_bytes"
    return r is not None and m[metric] < r


def no_value(metric: str, b: float) -> dict:
    return {"metric": metric, "direction": DIRECTION.get(metric, "exact"), "baseline": b,
            "current": math.nan, "ratio": math.nan, "allowed": math.nan, "verdict": "regression",
            "note": f"no value now (NaN, null or absent); the baseline has {b:.6g}"}


def _undecided_memory(metric: str, bm: dict, cm: dict, r: float | None, device) -> dict | None:
    """The row of a memory metric the gate must not compare (module doc), or None."""
    b, c = bm.get(metric), cm.get(metric)
    why = []
    for name, m, v in (("the baseline", bm, b), ("the run", cm, c)):
        if _below(metric, m, r):
            why.append(f"{name} is below resolution (< {r:.0f} B)")
    if b == 0 and not why:
        why.append("the baseline is 0 B: not a measurement of a computation that allocates")
    if not why:
        return None
    coarser = " (the coarser of the two rows' probe resolutions)" if r is not None and any(
        "below" in w for w in why) else ""
    return {"metric": metric, "direction": DIRECTION[metric], "baseline": math.nan if b is None else b,
            "current": math.nan if c is None else c, "ratio": math.nan, "allowed": math.nan,
            "verdict": UNDECIDED_RESOLUTION,
            "note": "; ".join(why) + coarser + ": not compared (--strict fails on it)"}


def rank_p(base_samples, cur_samples, d: float) -> tuple[float, float] | None:
    """The rank test that the run's repeats are slower than the baseline's net of the drift ``d``:
    (p, smallest p possible), or None without both samples."""
    if not base_samples or not cur_samples:
        return None
    return mann_whitney_greater(list(cur_samples), [x * d for x in base_samples])


def metric_rows(base: dict, cur: dict, d: float = 1.0, noise: float | None = None) -> list[dict]:
    """The verdict rows of one point pair (both ``ok``); ``d``: the suite's drift; ``noise``: the
    machine's noise in its group (``reports.gate.noise``; None: not measured)."""
    rows = []
    bm, cm = base["metrics"], cur["metrics"]
    device = cur.get("device", "cpu")
    for metric, direction in DIRECTION.items():
        if metric in MEMORY:
            r = max((x for x in (resolution(metric, bm, device), resolution(metric, cm, device))
                     if x is not None), default=None)
            if metric in bm or _below(metric, bm, r):
                row = _undecided_memory(metric, bm, cm, r, device)
                if row:
                    rows.append(row)
                    continue
        if metric not in bm:
            continue
        if metric not in cm:
            rows.append(no_value(metric, bm[metric]))
            continue
        b, c = bm[metric], cm[metric]
        tol = tolerance(metric, bm, device, cm, suite=cur.get("suite"))
        ratio = c / b if b else (1.0 if c == b else math.inf)
        # time-derived metrics are judged net of the suite's drift (time_s: / d; rates: * d); the drift
        # excuses, never accuses: where the comparison kernels got faster than in the baseline (d < 1)
        # a point is judged on its own ratio (issue 25: a quiet run's backward comparison kernels ran
        # x0.85, and an unchanged target at x1.32 read as +55 % "net of drift")
        d_held = max(d, 1.0)
        net = ratio if metric not in TIME_DERIVED else ratio / d_held if direction == "lower" else ratio * d_held
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
        elif note and metric in TIME_DERIVED and d < 1:
            note += f"; the suite's drift x{d:.3f} (faster than the baseline) is not held against it"
        verdict = "regression" if worse else "improvement" if better else "ok"
        if metric in TIME_DERIVED:
            verdict, note = _time_verdict(verdict, note, base, cur, metric, tol, d_held, noise=noise, net=net)
        rows.append({"metric": metric, "direction": direction, "baseline": b, "current": c,
                     "ratio": ratio, "allowed": tol, "verdict": verdict, "note": note})
    rows += _exact_rows(bm, cm)
    return rows


def _time_verdict(verdict: str, note: str, base: dict, cur: dict, metric: str, tol: float,
                  d: float, *, noise: float | None = None, net: float = 1.0) -> tuple[str, str]:
    """A time-derived metric's verdict under the spread rule (``harness.verdicts.gate_rule``): a regression
    within ``NOISE_SIGMAS`` of the run's machine noise is undecided (a busy machine), not red."""
    device = cur.get("device", "cpu")
    spread = max(relative_spread(metric, base["metrics"]), relative_spread(metric, cur["metrics"]))
    note += f"; detects >= +{tol * 100:.0f}% (spread {spread * 100:.0f}%)"
    if base.get("runs"):
        note += f"; baseline: {base['runs']} runs, between-run spread {base.get('between_run_spread', 0.0) * 100:.0f}%"
    if verdict == "regression":
        test = rank_p(base.get("samples", {}).get(SAMPLES), cur.get("samples", {}).get(SAMPLES), d)
        if test is not None and test[1] < ALPHA:  # the test can decide at these sample sizes
            note += f"; rank test p = {test[0]:.2g}"
            if test[0] >= ALPHA:
                return undecided_spread(spread), note + f" >= {ALPHA}: the repeats overlap"
        if noise is not None:
            bound = math.exp(NOISE_SIGMAS * noise)
            worse = net if DIRECTION.get(metric, "lower") == "lower" else (1 / net if net else math.inf)
            if worse <= bound:
                return undecided_spread(bound - 1), note + (
                    f"; within the run's machine noise: +{(bound - 1) * 100:.0f}% ({NOISE_SIGMAS:g} robust sd of "
                    f"the comparison kernels' time ratios, {noise * 100:.0f}% in log)")
    elif verdict == "ok" and not decides(tol, device):
        return undecided_spread(spread), note + " (too noisy for the gate's stated slowdown)"
    return verdict, note


def _matches(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _exact_rows(bm: dict, cm: dict) -> list[dict]:
    rows = []
    for measured, formula in EXACT.items():
        if not all(m in bm for m in (measured, formula)):
            continue
        gone = [m for m in (measured, formula) if m not in cm]
        if gone:
            rows.append(no_value(gone[0], bm[gone[0]]))
            continue
        was, now = _matches(bm[measured], bm[formula]), _matches(cm[measured], cm[formula])
        verdict = ("regression" if was and not now else "fixed" if now and not was
                   else "ok" if now else "mismatch")
        rows.append({"metric": f"{measured}=={formula}", "direction": "exact", "baseline": bm[measured],
                     "current": cm[measured], "ratio": math.nan, "allowed": 0.0, "verdict": verdict,
                     "note": f"{formula}: baseline {bm[formula]:.6g}, now {cm[formula]:.6g}"})
    return rows
