"""Baseline comparison: per (key, metric), current vs baseline, with a noise-aware threshold, and
the gate that passes only on what it compared.

Thresholds (one row per compared metric):

- Metrics with a direction (``DIRECTION``): ``ratio = current / baseline``. The allowed relative change
  is ``tol = max(floor, K_SPREAD * relative spread)``, the floor being ``FLOOR[metric]``, or for
  time-derived metrics ``TIME_FLOOR[device kind]`` (25 % CPU, 10 % GPU). The spread is measured in
  repeats, in the baseline and in the run, and the larger counts (two medians are only as
  comparable as the noisier of them): for time-derived metrics (time_s, tflops, tokens_per_s)
  ``time_iqr_s / time_s``; for accuracy the half width of its 95 % CI over the accuracy; for peak
  memory ``(peak_mem_max_bytes - peak_mem_min_bytes) / peak_mem_bytes`` over the point's repeated
  measurements (which freed blocks a call reuses moves a CPU RSS peak by tens of percent from call
  to call). Lower-is-better regresses when ``ratio > 1 + tol``, higher-is-better when
  ``ratio < 1 / (1 + tol)``. Time-derived metrics follow the spread rule of ``harness.verdicts.gate_rule``
  (per point, from the repeats of both runs; ``reports.decide``): ``tol`` is the slowdown the point
  can detect (the ``allowed`` column; the note says "detects >= +X%"); a point whose ``tol`` is over
  the gate's stated slowdown (``GATE_SLOWDOWN``: 50 % CPU, 25 % GPU) is "undecided (spread X %)"
  unless it moved beyond ``tol``, and a move beyond ``tol`` that the rank test over both runs'
  stored repeats (``time_samples_s``) does not confirm at ``ALPHA`` is undecided too, and so is one
  within ``NOISE_SIGMAS`` robust sd of the run's machine noise (``noise``: the comparison kernels'
  log time ratios in the point's group; a busy machine slows points by different factors).
- Undecided: CPU peak memory below the probe's resolution in either run (recorded as null with
  ``peak_mem_resolution_bytes``, or a value under it; rows without a resolution: 1 MiB), and a
  baseline of 0 bytes for a memory metric, are "undecided (below resolution)", never compared.
  Undecided rows are counted in the summary and fail the gate only with ``strict`` (``--strict``);
  their values were compared, so a run whose points are all undecided (a busy machine) exits 0, not 2.
- Machine drift: per (run, suite, device kind, pass) the drift ``d`` is the median of the ``time_s``
  ratios of the harness's comparison kernels (``_drifts``: at least ``DRIFT_MIN_POINTS`` pairs; else
  the run's comparison kernels of every suite; the target's own rows only where no comparison kernel
  was timed, so that a uniformly slower target cannot hide in the drift); time-derived metrics are judged net of it,
  and the drift itself is one row per suite (metric ``time_s:suite_median``), worse when
  ``d > 1 + TIME_FLOOR[device kind]``.
- A baseline of several runs (``reports.baseline_runs``): each point is their median, its spread
  the larger of the runs' own and their between-run spread, its repeats pooled.
- CPU memory is also allowed ``MEM_SLACK_CPU`` bytes beyond the relative floor (allocator arenas).
- Exact-match pairs (``EXACT``): a measured value that equalled its formula in the baseline and does
  not now is a regression.
- A metric the baseline has a value for and the run has not (NaN, null, absent) is a regression.
- Status: a point ``ok`` in the baseline and ``oom``/``error``/``nan`` now is a regression; ``skipped``
  now counts as missing, except where the sweep stopped at a size whose predicted call time is
  over the profile's per-call budget (reason "size cap: ..."): that decision follows the machine's
  speed at the moment (a busy 2-core VM moved it by one size from run to run), and the sizes
  below it are compared.
- New: a run's point the baseline lacks (a backward pass, a case or size the baseline was not
  measured with) is "new", shown, never a regression.

The gate (``gate``):

- Scope (``--cases``): "target" (the default, for every target, the built-in reference too) gates
  the rows of the target's own code (role "target"); "all" gates every row, the harness's
  comparison kernels and the per-suite drift too. Rows outside the scope are still compared and
  shown: a verdict that would be a regression reads ``regression (not gated)``. The comparison
  kernels are out of the default because on a shared machine they measure the machine: in six
  runs of the README main job against cpu-reference on the busy 2-core VM, the banded kernel and
  the LSTM moved +30 to +44 % net of the suite's drift in five and the whole suite x2 in one, while
  the reference's own rows held.
- Missing: a baseline point in scope that no compared run has (or that is ``skipped`` now) is a
  regression, unless ``allow_missing``. Points of suites or cases the runs did not ask for (their
  env.json's ``suites``/``cases``) are "not requested", not missing.
- Exit status (``Gate.code``): 1 on any regression in scope (with ``strict``, also on any undecided
  row in scope); 2 when nothing in scope was compared (no point of the run's targets in the
  baseline, or none with a value to compare); else 0.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from harness.verdicts.gate_rule import TIME_FLOOR, device_kind, is_undecided, verdict_kind
from harness.verdicts.runfolder import BAD_STATUSES, DEFAULT_PASS, SIZE_CAP_REASON, target_id
from harness.reports.baseline_runs import combine
from harness.reports.decide import metric_rows

DRIFT_MIN_POINTS = 4
SCOPES = ("target", "all")
COLUMNS = ["run_id", "machine", "key", "suite", "case", "role", "metric", "direction", "baseline",
           "current", "ratio", "allowed", "verdict", "gated", "note"]
#: verdicts of a comparison that was made (a pair that produced none compared nothing)
COMPARED = ("ok", "improvement", "regression", "fixed", "mismatch")
UNGATED = "regression (not gated)"


def _points(df: pd.DataFrame, stored: dict | None = None) -> dict[tuple[str, str], dict]:
    """(run_id, key) -> {suite, case, role, impl, machine, status, reason, metrics{}, device, pass,
    samples{}} (``samples``: the point's stored repeats, from ``stored``: ``reports.load.point_samples``)."""
    out: dict[tuple[str, str], dict] = {}
    stored = stored or {}
    passes = df["pass"].tolist() if "pass" in df.columns else [None] * len(df)
    for row, pass_ in zip(df.itertuples(index=False), passes):
        k = (row.run_id, row.key)
        p = out.setdefault(k, {"suite": row.suite, "case": row.case, "role": row.role, "impl": row.impl,
                               "machine": row.machine, "status": row.status, "reason": row.reason,
                               "metrics": {}, "device": device_kind(row.device),
                               "samples": stored.get(k, {}),
                               "pass": DEFAULT_PASS if pass_ is None or pd.isna(pass_) else str(pass_)})
        if not pd.isna(row.metric) and not pd.isna(row.value):
            p["metrics"][row.metric] = float(row.value)
    return out


def noise(pairs: list[tuple[dict, dict]]) -> float | None:
    """The machine's noise in one group: the robust standard deviation (1.4826 x the median
    absolute deviation) of the log ``time_s`` ratios over (baseline, current) pairs, None with
    fewer than ``DRIFT_MIN_POINTS`` timed pairs."""
    logs = sorted(math.log(c["metrics"]["time_s"] / b["metrics"]["time_s"]) for b, c in pairs
                  if b["metrics"].get("time_s") and c["metrics"].get("time_s"))
    if len(logs) < DRIFT_MIN_POINTS:
        return None
    mid = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - mid) for x in logs)


def drift(pairs: list[tuple[dict, dict]]) -> float | None:
    """The median ``time_s`` ratio current / baseline over (baseline, current) point pairs
    (None with fewer than ``DRIFT_MIN_POINTS`` timed pairs: no drift is taken out)."""
    ratios = sorted(c["metrics"]["time_s"] / b["metrics"]["time_s"] for b, c in pairs
                    if b["metrics"].get("time_s") and c["metrics"].get("time_s"))
    if len(ratios) < DRIFT_MIN_POINTS:
        return None
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else math.sqrt(ratios[mid - 1] * ratios[mid])


POOLED = "the run's comparison kernels of other suites"


def _drifts(groups: dict) -> tuple[dict, dict, dict]:
    """The drift of each (run, suite, device, pass) group, what it was measured on, and the
    machine's noise there (``noise``, from the same comparison pairs; none where the drift came
    from the target's own rows, which may be the regression).

    The machine is measured on the harness's comparison kernels (role other than "target"), never
    on the rows being judged: a target made uniformly slower would otherwise move the median it is
    judged net of, and hide in it. A group with fewer than ``DRIFT_MIN_POINTS`` comparison pairs
    (the kv_cache suite times only the target) takes the run's comparison pairs of every suite with
    the same device and pass; only where the run timed no comparison kernel at all does the drift
    come from every pair of the group (a uniform slowdown then passes as drift: the note says so)."""
    drifts, sources, noises = {}, {}, {}
    machine = {g: [(b, c) for b, c in pairs if c["role"] != "target"] for g, pairs in groups.items()}
    for g, pairs in groups.items():
        run_id, _, kind, pass_ = g
        pooled = [pair for h, ps in machine.items() if (h[0], h[2], h[3]) == (run_id, kind, pass_) for pair in ps]
        for candidates, source in ((machine[g], "the suite's comparison kernels"),
                                   (pooled, POOLED),
                                   (pairs, "every point (no comparison kernel timed: a uniform slowdown "
                                           "of the target reads as drift)")):
            d = drift(candidates)
            if d is not None:
                drifts[g], sources[g] = d, f"{source}, {len(candidates)} pairs"
                if candidates is not pairs:
                    noises[g] = noise(candidates)
                break
    return drifts, sources, noises


def _status_row(base: dict, cur: dict, allow_missing: bool) -> dict | None:
    b, c = base["status"], cur["status"]
    if b == c == "ok":
        return None
    reason = cur["reason"] if not pd.isna(cur["reason"]) else ""
    extra = ""
    if b == "ok" and c in BAD_STATUSES:
        verdict = "regression"
    elif b == "ok" and c == "skipped" and reason.startswith(SIZE_CAP_REASON):
        verdict = "skipped (size cap)"  # the machine's speed now; the smaller sizes are compared
    elif b == "ok" and c == "skipped":  # not measured now: as good as missing
        verdict = "skipped" if allow_missing else "regression"
        extra = "; not measured now (--allow-missing accepts it)" if not allow_missing else ""
    elif b == "ok":
        verdict = c
    elif c == "ok":
        verdict = "fixed"
    else:
        verdict = "still failing" if c in BAD_STATUSES else c
    return {"metric": "status", "direction": "", "baseline": math.nan, "current": math.nan,
            "ratio": math.nan, "allowed": math.nan, "verdict": verdict,
            "note": f"{b} -> {c}" + (f": {reason}" if reason else "") + extra}


@dataclass
class Gate:
    """The comparison table and what the gate makes of it (module doc)."""
    table: pd.DataFrame
    scope: str
    matched: int                  # points in scope compared in the run and the baseline
    targets: list[str] = field(default_factory=list)           # the runs' target ids
    baseline_targets: list[str] = field(default_factory=list)  # the baseline's
    strict: bool = False          # an undecided row in scope fails the gate

    def regressions(self) -> pd.DataFrame:
        return regressions(self.table)

    def undecided(self) -> pd.DataFrame:
        """The rows in scope the gate could not decide (they fail it only when ``strict``)."""
        return undecided(self.table)

    @property
    def code(self) -> int:
        if self.matched == 0:
            return 2
        return exit_code(self.table, self.strict)

    def problem(self) -> str | None:
        """Why the gate could not judge (exit 2), or None."""
        if self.matched:
            return None
        if self.scope == "target" and self.targets and set(self.targets) != set(self.baseline_targets):
            return (f"nothing to compare: the run's target rows are of {', '.join(self.targets)}, the "
                    f"baseline's of {', '.join(self.baseline_targets) or 'no target'}. A target's rows "
                    f"are only compared with a baseline of the same target (keep one in your repository: "
                    f"a bench run folder of it, passed by its path, --baseline ci/baselines/cpu; docs/ci.md); --cases all also gates the harness's "
                    f"comparison kernels")
        return (f"nothing to compare in scope (--cases {self.scope}): no point of the run matched a "
                f"baseline point with a value to compare, so the gate cannot pass or fail it")


def _in_scope(point: dict, scope: str) -> bool:
    return scope == "all" or point["role"] == "target"


def gate(current: pd.DataFrame, baseline: pd.DataFrame, *, scope: str = "target", allow_missing: bool = False,
         requested: Callable[[str, str, str], bool] | None = None, strict: bool = False,
         current_samples: dict | None = None, baseline_samples: dict | None = None) -> Gate:
    """Compare and judge. ``requested(suite, case, pass_)``: whether the runs asked for that suite,
    case and pass (``reports.load.requested``; None: everything was asked for). ``strict``: an
    undecided row in scope fails the gate too. ``*_samples``: the points' stored repeats
    (``reports.load.point_samples``; None: the IQR rule alone)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    base_points = combine(_points(baseline, baseline_samples))  # (a baseline of several runs: per point)
    cur_points = _points(current, current_samples)
    rows, compared = [], set()
    groups: dict[tuple[str, str, str], list] = {}
    for (run_id, key), cur in cur_points.items():
        base = base_points.get(key)
        if base is not None and base["status"] == cur["status"] == "ok":
            # a pass is its own workload (autograd moves memory, the forward computes): each its own drift
            groups.setdefault((run_id, cur["suite"], cur["device"], cur["pass"]), []).append((base, cur))
    drifts, sources, noises = _drifts(groups)
    for (run_id, suite, kind, pass_), d in drifts.items():
        if sources[(run_id, suite, kind, pass_)].startswith(POOLED):
            continue  # (its row is the suite's that measured it; its points' notes give the factor)
        floor = TIME_FLOOR[kind]
        verdict = "regression" if d > 1 + floor else "improvement" if d < 1 / (1 + floor) else "ok"
        machine = groups[(run_id, suite, kind, pass_)][0][1]["machine"]
        what = suite if pass_ == DEFAULT_PASS else f"{suite} {pass_}"
        rows.append({"run_id": run_id, "machine": machine, "key": f"{suite}|*" + ("" if pass_ == DEFAULT_PASS else f":{pass_}"),
                     "suite": suite, "case": "*",
                     "role": "comparison", "metric": "time_s:suite_median", "direction": "lower",
                     "baseline": 1.0, "current": d, "ratio": d, "allowed": floor, "verdict": verdict,
                     "gated": scope == "all",
                     "note": f"every {what} point {'+' if d >= 1 else ''}{(d - 1) * 100:.1f}% (median; "
                             f"allowed {floor * 100:.0f}% on {kind}): the machine's drift, taken out of "
                             f"each point's time comparison; measured on "
                             f"{sources[(run_id, suite, kind, pass_)]}"})
    for (run_id, key), cur in cur_points.items():
        head = {"run_id": run_id, "machine": cur["machine"], "key": key, "suite": cur["suite"],
                "case": cur["case"], "role": cur["role"], "gated": _in_scope(cur, scope)}
        base = base_points.get(key)
        if base is None:
            rows.append({**head, "metric": "", "verdict": "new", "note": "not in the baseline"})
            continue
        found = []
        status = _status_row(base, cur, allow_missing)
        if status:
            found.append(status)
        if base["status"] == "ok" and cur["status"] == "ok":
            g = (run_id, cur["suite"], cur["device"], cur["pass"])
            found += metric_rows(base, cur, drifts.get(g, 1.0), noises.get(g))
        if head["gated"] and any(r["verdict"] in COMPARED or is_undecided(r["verdict"]) for r in found):
            compared.add(key)
        rows += [{**head, **r} for r in found]
    measured = {k for _, k in cur_points}  # one job's points may lie in several run folders
    run_targets = {target_id(p["impl"]) for p in cur_points.values() if p["role"] == "target"}
    for key, base in base_points.items():
        if key in measured:
            continue
        head = {"run_id": "", "machine": "", "key": key, "suite": base["suite"], "case": base["case"],
                "role": base["role"], "metric": "point", "gated": _in_scope(base, scope)}
        if requested is not None and not requested(base["suite"], base["case"], base["pass"]):
            rows.append({**head, "gated": False, "verdict": "not requested",
                         "note": "in the baseline; its suite or case was not asked of this run"})
        elif scope == "target" and base["role"] == "target" and target_id(base["impl"]) not in run_targets:
            rows.append({**head, "gated": False, "verdict": "missing",
                         "note": "a point of another target (a target is only compared with itself)"})
        elif head["gated"] and not allow_missing:
            rows.append({**head, "verdict": "regression",
                         "note": "missing: in the baseline, not in any run compared (a killed or partial "
                                 "run; --allow-missing accepts it)"})
        else:
            rows.append({**head, "verdict": "missing", "note": "in the baseline, not in any run compared"
                         + (" (allowed)" if head["gated"] else " (not gated)")})
    table = pd.DataFrame(rows, columns=COLUMNS)
    ungated = (table["verdict"] == "regression") & ~table["gated"].astype(bool)
    table.loc[ungated, "verdict"] = UNGATED
    for c in ("baseline", "current", "ratio", "allowed"):
        table[c] = table[c].astype("float64")
    table["gated"] = table["gated"].astype(bool)
    for c in set(COLUMNS) - {"baseline", "current", "ratio", "allowed", "gated"}:
        table[c] = table[c].astype("string")
    targets = sorted(run_targets)
    base_targets = sorted({target_id(p["impl"]) for p in base_points.values() if p["role"] == "target"})
    return Gate(table, scope, len(compared), targets, base_targets, strict)


def gate_table(current: pd.DataFrame, baseline: pd.DataFrame, **kw) -> pd.DataFrame:
    """The comparison table (``gate(...).table``): one row per compared (run, key, metric), status
    changes, the per-suite drift, and new / missing / not requested points."""
    return gate(current, baseline, **kw).table


def regressions(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["verdict"] == "regression"].reset_index(drop=True)


def undecided(table: pd.DataFrame) -> pd.DataFrame:
    """The gated rows whose verdict is "undecided (...)"."""
    mask = table["verdict"].map(is_undecided).astype(bool) & table["gated"].astype(bool)
    return table[mask].reset_index(drop=True)


def exit_code(table: pd.DataFrame, strict: bool = False) -> int:
    if (table["verdict"] == "regression").any():
        return 1
    return 1 if strict and len(undecided(table)) else 0


def detectable_summary(table: pd.DataFrame) -> str | None:
    """One line on the slowdowns the gated time points can detect (their ``allowed``), or None."""
    t = table[(table["metric"] == "time_s") & table["gated"].astype(bool) & table["allowed"].notna()]
    if t.empty:
        return None
    q = t["allowed"].quantile([0.0, 0.5, 1.0]).tolist()
    return (f"the {len(t)} gated time point(s) detect a slowdown of +{q[1] * 100:.0f}% (median; "
            f"+{q[0] * 100:.0f}% to +{q[2] * 100:.0f}%), each in its row's 'allowed' column")


def counts(table: pd.DataFrame) -> dict[str, int]:
    """Rows per verdict; every "undecided (spread X %)" counts as "undecided (spread)"."""
    return {str(k): int(v) for k, v in table["verdict"].map(verdict_kind).value_counts().items()}
