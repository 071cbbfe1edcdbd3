"""Conformance time per target: the wall time of the whole conformance run (every suite, the
``harness-ci`` Hypothesis profile) for the target, in each isolation mode.

Each point runs ``python -m harness check --impl TARGET --hypothesis-profile ci --isolation MODE`` in a fresh
process (``CI=true``, one torch thread, as the main job does) and records the session's wall time
as pytest reports it (collection and the tests; the interpreter's start-up excluded) and the
process's. The modes alternate within each repeat, so load that drifts during the run reaches
both alike; the summary checks the isolation overhead, the median of the paired ratios
process / none, against ``OVERHEAD_LIMIT`` (issue 10: within 1.5x of the in-process time) and
the process-mode time against ``TIME_LIMIT_S`` per target. These are benchmark checks,
reported, never a unit-test timing assertion.
"""
from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from harness.bench import Check, Context
from harness.bench.points import Point

SUITE = "conformance_time"
MODES = ("none", "process")
OVERHEAD_LIMIT = 1.5
TIME_LIMIT_S = 60.0
_SESSION = re.compile(r"in ([0-9.]+)s")


def run_check(impl: str, mode: str) -> dict:
    """One conformance run; its wall times and pass/fail counts."""
    with tempfile.TemporaryDirectory(prefix="harness-conftime-") as out:
        env = dict(os.environ, CI="true", PYTHONHASHSEED="0")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "harness", "check", "--impl", impl, "--hypothesis-profile", "ci",
                               "--isolation", mode, "--report", out], capture_output=True, text=True, env=env,
                              timeout=1800)
        wall = time.perf_counter() - start
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    session = _SESSION.search(tail)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    return {"time_s": float(session.group(1)) if session else wall, "process_wall_s": wall,
            "exit_code": done.returncode, "summary": tail, **{f"n_{k}": v for k, v in counts.items()}}


def measure(ctx: Context, p: dict) -> dict:
    runs = {mode: [] for mode in MODES}
    for i in range(p["repeats"]):
        for mode in (MODES if i % 2 == 0 else MODES[::-1]):  # alternate which goes first
            runs[mode].append(run_check(ctx.impl, mode))
    ratios = [b["time_s"] / a["time_s"] for a, b in zip(runs["none"], runs["process"])]
    med = {m: statistics.median(r["time_s"] for r in runs[m]) for m in MODES}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"time_s": med["process"], "time_none_s": med["none"], "overhead_ratio": statistics.median(ratios),
            "ratios": ratios, "repeats": p["repeats"], "exit_codes": [r["exit_code"] for m in MODES for r in runs[m]],
            "summary": runs["process"][-1]["summary"], "loadavg_1m": load, "cpu_count": os.cpu_count()}


def points(ctx: Context) -> list[Point]:
    case = "target.conformance"
    if not ctx.wants(case):
        return []
    p = {"profile": "harness-ci", "repeats": 1 if ctx.profile.name == "tiny" else 2}
    return [Point(SUITE, case, p, lambda: measure(ctx, p), role="target")]


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    ok = [r for r in rows if r.get("suite") == SUITE and r.get("status") == "ok"]
    if not ok:
        return [Check("conformance time per target", None, "no measured point")]
    m = ok[-1]["metrics"]
    ratio, t = m.get("overhead_ratio"), m.get("time_s")
    return [Check("isolation overhead (process / in-process, CI profile)",
                  None if ratio is None else ratio <= OVERHEAD_LIMIT,
                  f"{ratio:.2f}x ({m.get('time_none_s', float('nan')):.1f} s -> {t:.1f} s), limit {OVERHEAD_LIMIT}x"),
            Check("conformance time per target (CI profile, isolated)", None if t is None else t <= TIME_LIMIT_S,
                  f"{t:.1f} s, limit {TIME_LIMIT_S:.0f} s")]
