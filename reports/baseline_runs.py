"""A baseline of several runs: each point's between-run spread (issue 25).

One run's repeats see the noise of a minute. Between quiet runs on the 2-core VM the same point
moved far more: the reference's backward at n = 256-512 came back x1.32 and x1.53 against a
baseline of another day while its repeats spread 13-20 % (notes/MEASUREMENTS.md, "The gate as
rates"), and the floors cannot know which points do that. A stored baseline may therefore hold
several runs of the same points (its folder and immediate sub-folders that are run folders:
``reports/baselines/cpu-reference/quiet-2/``, ...). The gate combines them per point:

- every metric: the median over the runs (a metric some run lacks, e.g. a peak below the
  probe's resolution, is left out: the point reads as below resolution); ``time_min_s`` and
  ``peak_mem_min_bytes`` the smallest, ``peak_mem_max_bytes`` the largest;
- ``time_iqr_s``: the median's relative spread is the larger of the runs' own (their median
  IQR / time) and the between-run spread ``between_run_spread`` of their medians, so every
  time-derived metric's allowance, its "detects >= +X %" and its undecided verdict follow the
  larger; the point records ``runs`` and ``between_run_spread`` for the note;
- the stored repeats: pooled over the runs (the rank test then asks whether the run's repeats
  are slower than the baseline's repeats of every run);
- a point is combined from the runs where its status is ``ok``; with fewer than two of those it
  is the last run's point, as with a single-run baseline.
"""
from __future__ import annotations

import copy
import statistics

#: d2(k): the expected range of k normal draws in standard deviations (control charts)
D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}
#: the interquartile range of a normal distribution in standard deviations (an IQR's scale)
IQR_PER_SD = 1.349
_SMALLEST = ("time_min_s", "peak_mem_min_bytes")
_LARGEST = ("peak_mem_max_bytes",)


def between_run_spread(values: list[float]) -> float:
    """The relative spread of a point's run medians, on the scale of one run's relative IQR: the
    standard deviation estimated from their range (``D2``; from their IQR for more than 10 runs)
    times ``IQR_PER_SD``, over their median. 0 for fewer than two values."""
    values = sorted(v for v in values if v is not None)
    if len(values) < 2 or not statistics.median(values):
        return 0.0
    if len(values) in D2:
        sd = (values[-1] - values[0]) / D2[len(values)]
    else:
        q1, _, q3 = statistics.quantiles(values, n=4)
        sd = (q3 - q1) / IQR_PER_SD
    return IQR_PER_SD * sd / statistics.median(values)


def combine(points: dict) -> dict:
    """``(run_id, key) -> point`` (``reports.gate._points`` of a baseline) -> ``key -> point``:
    one point per key, combined over the runs that measured it (module doc)."""
    by_key: dict[str, list[dict]] = {}
    for (_, key), p in points.items():
        by_key.setdefault(key, []).append(p)
    return {key: ps[-1] if len(ps) == 1 else combined(ps) for key, ps in by_key.items()}


def combined(points: list[dict]) -> dict:
    """One point from several runs' measurements of it (module doc)."""
    ok = [p for p in points if p["status"] == "ok"]
    if len(ok) < 2:
        return (ok or points)[-1]
    out = copy.deepcopy(ok[-1])
    names = set.intersection(*(set(p["metrics"]) for p in ok))
    metrics = {}
    for name in names:
        values = [p["metrics"][name] for p in ok]
        metrics[name] = (min(values) if name in _SMALLEST else max(values) if name in _LARGEST
                         else statistics.median(values))
    times = [p["metrics"]["time_s"] for p in ok if p["metrics"].get("time_s")]
    if len(times) == len(ok) and "time_s" in metrics:
        own = [p["metrics"]["time_iqr_s"] / p["metrics"]["time_s"] for p in ok
               if p["metrics"].get("time_iqr_s") is not None]
        between = between_run_spread(times)
        metrics["time_iqr_s"] = metrics["time_s"] * max(statistics.median(own) if own else 0.0, between)
        out["between_run_spread"] = between
    out["metrics"] = metrics
    pooled: dict[str, list[float]] = {}
    for p in ok:
        for name, values in (p.get("samples") or {}).items():
            pooled.setdefault(name, []).extend(values)
    out["samples"] = {n: v for n, v in pooled.items()
                      if all((p.get("samples") or {}).get(n) for p in ok)}
    out["runs"] = len(ok)
    return out
