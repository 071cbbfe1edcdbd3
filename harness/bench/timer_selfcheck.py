"""Timer self-check: the harness timer against the libraries' timers on one kernel.

CPU: an n x n x n float32 matmul timed by ``harness.bench.timer.time_cpu`` and by
``torch.utils.benchmark.Timer.blocked_autorange`` (same thread count). CUDA: SDPA
timed by ``time_cuda`` and ``triton.testing.do_bench`` (both flush L2 and use the
median; skipped when triton is not installed). The two timers run back to back in each
of ``rounds`` rounds (alternating which goes first) and the median over rounds of the
paired ratio harness / library is compared: passed = |ratio - 1| <= tolerance (5 % CPU,
3 % CUDA); pairing keeps load that changes between rounds out of the ratio. The row records
both times and the relative difference; the benchmark reports pass/fail, it is not
a unit-test timing assertion.
"""
from __future__ import annotations

import functools
import os
import statistics

import torch
import torch.nn.functional as F

from harness.bench import Check, Context
from harness.bench.points import Point, Skip
from harness.bench.timer import reference_timer, time_fn

SUITE = "timer_selfcheck"


def _kernel(p: dict, device: str):
    gen = torch.Generator(device=device).manual_seed(0)
    dtype = getattr(torch, p["dtype"])
    if p["kernel"] == "mm":
        a = torch.randn(p["size"], p["size"], generator=gen, device=device).to(dtype)
        b = torch.randn(p["size"], p["size"], generator=gen, device=device).to(dtype)
        return lambda: torch.mm(a, b)
    q, k, v = (torch.randn(1, 16, p["n"], 128, generator=gen, device=device).to(dtype) for _ in range(3))
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)


def measure(ctx: Context, p: dict) -> dict:
    prof = ctx.profile.timer
    fn = _kernel(p, ctx.device)
    ours, theirs, which = [], [], None
    with torch.inference_mode():
        for i in range(prof.rounds):
            pair = []
            for who in (("ours", "theirs") if i % 2 == 0 else ("theirs", "ours")):  # alternate the order
                if who == "ours":
                    pair.append(("ours", time_fn(fn, ctx.device, min_run_s=prof.min_run_s, min_blocks=5,
                                                 max_run_s=2.0).median_s))
                else:
                    ref, which = reference_timer(fn, ctx.device, min_run_s=prof.min_run_s)
                    if ref is None:
                        raise Skip(f"no library timer to compare with: {which}")
                    pair.append(("theirs", ref))
            got = dict(pair)
            ours.append(got["ours"])
            theirs.append(got["theirs"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    # paired: each round's two timings saw the same machine state (load, clocks)
    rel = statistics.median(a / b for a, b in zip(ours, theirs)) - 1.0
    return {"time_s": statistics.median(ours), "reference_time_s": statistics.median(theirs),
            "reference_timer": which, "rel_diff": rel,
            "passed": abs(rel) <= p["tolerance"], "harness_times_s": ours,
            "reference_times_s": theirs, "repeats": prof.rounds,
            "loadavg_1m": load, "cpu_count": os.cpu_count()}  # (tolerance, threads: in params)


def points(ctx: Context) -> list[Point]:
    prof = ctx.profile.timer
    on_cuda = torch.device(ctx.device).type == "cuda"
    if on_cuda:
        p = {"kernel": "sdpa_causal", "n": 8 * prof.size, "dtype": prof.dtype, "tolerance": prof.tolerance,
             "threads": None}
    else:
        p = {"kernel": "mm", "size": prof.size, "dtype": "float32", "tolerance": prof.tolerance,
             "threads": torch.get_num_threads()}
    case = "harness_vs_triton" if on_cuda else "harness_vs_torch_timer"
    if not ctx.wants(case):
        return []
    return [Point(SUITE, case, p, functools.partial(measure, ctx, p))]


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    checks = []
    for r in rows:
        if r["suite"] != SUITE:
            continue
        if r["status"] != "ok":
            checks.append(Check(f"timer self-check ({r['case']})", None, f"{r['status']}: {r['reason']}"))
            continue
        m = r["metrics"]
        load = m.get("loadavg_1m")
        busy = (f"; the machine was busy (1-min load {load:.1f} on {m.get('cpu_count')} CPUs): "
                f"wall-clock timings of any timer are unreliable, rerun on an idle machine"
                if load is not None and m.get("cpu_count") and load > m["cpu_count"] else "")
        checks.append(Check(f"timer self-check ({r['case']})", bool(m["passed"]),
                            f"harness {m['time_s'] * 1e3:.3f} ms vs {m['reference_timer']} "
                            f"{m['reference_time_s'] * 1e3:.3f} ms: {m['rel_diff'] * 100:+.2f} % "
                            f"(tolerance +-{r['params']['tolerance'] * 100:.0f} %){busy}"))
    return checks
