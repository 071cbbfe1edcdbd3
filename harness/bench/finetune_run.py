"""Run the finetune suite without the rest of ``harness bench`` (tests, scripts, several targets).

    python -m harness.bench.finetune_run --out runs/ft --profile cpu [--impl TARGET] \\
        [--cases reference,swap.sdpa] [--seeds 0,1,2] [--also-impl FILE --also-out DIR]

``run(...)`` writes the same run folder as ``harness bench --suite finetune`` (env.json +
results.jsonl rows of suite "finetune"). Passing the same ``state`` dict to several calls in one
process reuses the data and the stock model's per-seed runs (the reference row of the second
folder then says ``reused_from_earlier_run``), so a second target costs only its swaps.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

from harness.basics import options
from harness.bench import Check, begin_run, open_target, profiles

#: finetune_run's profile names that are not bench profile names
BENCH_NAMES = {"smoke": "tiny"}


def run(out_dir, *, impl: str = options.DEFAULT_TARGET, profile: str = "cpu", cases=None, device: str = "cpu",
        seeds=None, resume: bool = False, progress: bool = False, state: dict | None = None,
        measure_peak: bool = False, any_device: bool = False, overwrite: bool = False
        ) -> tuple[list[dict], list[Check]]:
    """Measure the finetune points into ``out_dir``; returns (rows, acceptance checks).
    ``any_device``: run a CUDA profile's settings on ``device`` anyway (the gpu profile on a CPU
    takes ~12 min per seed on 2 cores; its accuracy is the same arithmetic up to rounding)."""
    from harness.bench import finetune as ft
    from harness.bench.store import ResultStore

    if device == "cuda":
        device = "cuda:0"
    prof = ft.PROFILES[ft.BENCH_PROFILES[profile]]
    if seeds is not None:
        prof = dataclasses.replace(prof, seeds=tuple(int(s) for s in seeds))
    if any_device:
        prof = dataclasses.replace(prof, needs_cuda=False)
    state = {} if state is None else state
    state["finetune_profile"] = prof
    store = ResultStore(out_dir, resume=resume, overwrite=overwrite)
    try:
        return _run(store, impl=impl, bench_profile=profiles.get(BENCH_NAMES.get(profile, profile)), prof=prof,
                    cases=cases, device=device, progress=progress, state=state, measure_peak=measure_peak)
    finally:
        store.close()


def _run(store, *, impl, bench_profile, prof, cases, device, progress, state, measure_peak):
    from harness.bench import env
    from harness.bench import finetune as ft
    from harness.bench.points import PointRunner

    peak = env.measure_peak_tflops(device) if measure_peak else {}
    # in this process (isolation none), so that ``state`` (data, the stock model's runs) is shared
    # between the calls of one process; a target that does not load raises TargetNotLoaded
    target = open_target(impl, device, [ft.SUITE])
    try:
        ctx = begin_run(store, target, impl, device, bench_profile, [ft.SUITE], peak=peak,
                        cases=cases, state=state, extra={"finetune_profile": prof.name})
        PointRunner(store, impl, device, progress=progress).run(ft.points(ctx), desc=ft.SUITE)
    finally:
        target.close()
    rows = store.rows()
    return rows, ft.summary(ctx, rows)


def _report(rows: list[dict], checks: list[Check], wall: float) -> None:
    for r in rows:
        m = r["metrics"]
        line = f"  {r['case']:<15} {r['status']:<7}"
        if r["status"] == "ok":
            ci = m.get("accuracy_ci95")
            line += f" accuracy {m['accuracy']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
            if "delta_accuracy" in m:
                d = m.get("delta_accuracy_ci95")
                line += f"  delta {m['delta_accuracy']:+.4f}" + (f" [{d[0]:+.4f}, {d[1]:+.4f}]" if d else "")
            if m.get("time_s"):
                line += f"  train {m['time_s']:.1f} s/seed"
            if m.get("peak_mem_bytes"):
                line += f"  peak {m['peak_mem_bytes'] / 2**20:.0f} MiB"
        else:
            line += f" {r['reason']}"
        print(line)
    for c in checks:
        print(c.line())
    print(f"  ({wall:.1f} s)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.bench.finetune_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    options.add_impl(p)
    p.add_argument("--profile", default="cpu", choices=["smoke", "tiny", "cpu", "gpu"])
    options.add_device(p)
    p.add_argument("--cases", default=None)
    p.add_argument("--seeds", default=None, help="comma-separated, e.g. 0,1,2 (default: the profile's)")
    p.add_argument("--threads", type=int, default=None)
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true")
    again.add_argument("--overwrite", action="store_true", help="discard the results already in --out")
    p.add_argument("--any-device", action="store_true",
                   help="run a CUDA-only profile (gpu) on --device anyway, e.g. its settings on the CPU")
    p.add_argument("--also-impl", default=None, help="a second target, run after the first, same process")
    p.add_argument("--also-out", default=None, help="its run folder")
    p.add_argument("--also-cases", default="majority_class,reference,swap.sdpa")
    p.add_argument("--strict", action="store_true", help="exit 1 when an acceptance check fails")
    args = p.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = args.seeds.split(",") if args.seeds else None
    state: dict = {}
    failed = False
    jobs = [(args.impl, args.out, args.cases)]
    if args.also_impl:
        jobs.append((args.also_impl, args.also_out or f"{args.out}_also", args.also_cases))
    for impl, out, cases in jobs:
        t0 = time.perf_counter()
        print(f"finetune: target {impl}, profile {args.profile}, device {args.device} -> {out}", flush=True)
        rows, checks = run(out, impl=impl, profile=args.profile, cases=cases.split(",") if cases else None,
                           device=args.device, seeds=seeds, resume=args.resume, progress=False, state=state,
                           any_device=args.any_device, overwrite=args.overwrite)
        _report(rows, checks, time.perf_counter() - t0)
        failed |= any(c.passed is False for c in checks)
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
