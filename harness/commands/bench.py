"""``bench``: benchmark a target on the reference model set; writes a run folder.

    python -m harness bench --impl TARGET --suite scaling,receptive_field,kv_cache \\
        --out runs/today [--profile cpu|gpu|tiny] [--resume | --overwrite]

The run folder (notes/RESULTS_SCHEMA.md): env.json (written first), results.jsonl
(one row per point, appended and fsynced as each is measured), fits.json,
receptive_field_grad.csv and checks.json (the acceptance checks it prints) at the end. A point
that fails (exception, NaN output, out of memory) is recorded with its status and reason and the
run goes on; a skipped point is left out of the acceptance checks, never counted as a mismatch.
The folder is locked while the run writes (a second run on it is refused, naming the first one's
pid), and a folder that holds results already is refused unless ``--resume`` (keep its ok points)
or ``--overwrite`` (discard them). A target that does not load is refused before anything is
written: no point is recorded for it. Exit status 0 when the run completed; 2 when it
could not start (the message says why); with ``--strict``, 1 when an acceptance check failed.

Time budget (``--time-budget-s``, default the profile's: 225 s for gpu, none otherwise;
the default does not apply to finetune): no point starts after the budget is spent; the
rest are recorded as skipped with a reason starting "time budget". With a budget, the
open-ended scaling sweep runs after the other suites, so a budget hit costs its largest
sizes, not the quick checks.
"""
from __future__ import annotations

import dataclasses
import sys
import time

from harness.basics import extras, options
from harness.bench import suites as registry

#: seconds one request to the target's worker may take (``--impl-timeout``): the largest is a
#: fine-tune seed, minutes on a loaded 2-core machine; a hung kernel is killed after it
DEFAULT_CALL_LIMIT_S = 900.0


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark a target: scaling, receptive field, KV cache")
    options.add_impl(p)
    p.add_argument("--suite", default=",".join(registry.DEFAULT),
                   help=f"comma-separated: {', '.join(registry.MODULES)}; "
                        f"all = {', '.join(registry.ALL)}")
    p.add_argument("--out", required=True, metavar="DIR", help="the run folder")
    p.add_argument("--profile", default=None, choices=["cpu", "gpu", "tiny"],
                   help="sizes and budgets (default: gpu when the device is CUDA, else cpu)")
    options.add_device(p, "auto", "cpu, cuda, cuda:N, auto (default), or all: one worker per CUDA device")
    p.add_argument("--devices", default=None, metavar="LIST",
                   help="one worker per listed device, e.g. cuda:0,cuda:1 (suites round-robin; "
                        "each worker writes OUT/worker<i>_<device>)")
    options.add_resume_overwrite(
        p, "keep the points already measured ok in DIR/results.jsonl, measure the rest",
        "discard the results already in DIR (without it, or --resume, a folder that holds results is refused)")
    p.add_argument("--cases", default=None,
                   help="comma-separated case names to run (default: all of each suite)")
    p.add_argument("--sizes", default=None, help="override the scaling sizes, e.g. 512,1024,2048")
    p.add_argument("--passes", default=None, metavar="LIST",
                   help="what scaling times, comma-separated of fwd (forward), bwd (backward alone), "
                        "fwd_bwd (both together); default: all three")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: the profile's; cpu profile: 1; "
                        "the finetune suite trains on every core)")
    p.add_argument("--no-keep-memory", action="store_true",
                   help="CPU: leave glibc returning freed memory to the kernel (timings then "
                        "include page faults); see harness/bench/memory.py")
    p.add_argument("--convention", action="append", default=[], metavar="KEY=VALUE")
    options.add_isolation(p, "process (default): the target runs, and its points are measured, in its own "
                             "worker process; none: in this process (for pdb)")
    options.add_impl_timeout(p, DEFAULT_CALL_LIMIT_S,
                             "wall-clock limit of each request to the target's worker: one validation, "
                             "timed block, gradient profile, decode run or fine-tune seed (default "
                             f"{DEFAULT_CALL_LIMIT_S:g}); past it the worker is killed and the point is an error")
    options.add_import_timeout(p, options.IMPORT_TIMEOUT_S)
    p.add_argument("--time-budget-s", type=float, default=None, metavar="SECONDS",
                   help="start no new point after this many seconds of the run; the rest are "
                        "recorded as skipped (default: the profile's, gpu 225 s; 0: no budget)")
    p.add_argument("--strict", action="store_true", help="exit 1 when an acceptance check fails")
    p.add_argument("--shard", type=options.shard, default=None, metavar="K/N",
                   help="run the K-th of N parts of the suites (every N-th; a CI matrix job, each into its own "
                        "--out; `harness report` reads the folders together)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars, a plain line per finished point instead (the default when "
                        "stderr is not a terminal)")
    p.set_defaults(func=main)


def _fan_out(args, suites, torch) -> int:
    from harness.bench import devices

    if args.devices:
        chosen = [d.strip() for d in args.devices.split(",") if d.strip()]
    else:
        chosen = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        if not chosen:
            print("--device all: no CUDA device is available", file=sys.stderr)
            return 2
    # the caller's other options, passed on to every worker
    argv = ["--impl", args.impl]
    for flag, value in (("--profile", args.profile), ("--cases", args.cases), ("--sizes", args.sizes),
                        ("--passes", args.passes),
                        ("--threads", args.threads), ("--time-budget-s", args.time_budget_s),
                        ("--isolation", args.isolation), ("--impl-timeout", args.impl_timeout),
                        ("--import-timeout", args.import_timeout)):
        if value is not None:
            argv += [flag, str(value)]
    for flag, on in (("--resume", args.resume), ("--overwrite", args.overwrite),
                     ("--no-keep-memory", args.no_keep_memory),
                     ("--strict", args.strict), ("--no-progress", args.no_progress)):
        if on:
            argv.append(flag)
    for conv in args.convention:
        argv += ["--convention", conv]
    return devices.launch(argv, suites, chosen, args.out)


def _cuda_problem(device: str, torch) -> str | None:
    """Why ``device`` (cuda or cuda:N) cannot be used, or None."""
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        return str(exc)
    if not torch.cuda.is_available():
        return "CUDA is not available"
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        return f"no such device: {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})"
    return None


def parse_passes(text: str | None) -> list[str] | None:
    """The ``--passes`` names (None: the profile's); SystemExit on an unknown one."""
    from harness.verdicts.runfolder import PASSES
    if not text:
        return None
    names = list(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in names if s not in PASSES]
    if unknown or not names:
        raise SystemExit(f"unknown pass(es) {', '.join(unknown) or repr(text)}; known: {', '.join(PASSES)}")
    return names


def ctx_cases(args) -> tuple[str, ...]:
    """The ``--cases`` names (empty: every case of each suite)."""
    return tuple(c.strip() for c in (args.cases or "").split(",") if c.strip())


def time_budget(args, profile) -> float | None:
    """Seconds of the run's budget: --time-budget-s, else the profile's; 0 or less = none."""
    budget = getattr(args, "time_budget_s", None)
    if budget is None:
        budget = getattr(profile, "time_budget_s", None)
    return budget if budget and budget > 0 else None


def order_for_budget(suites: list[str], budget: float | None) -> list[str]:
    """With a budget, the open-ended suites (scaling, finetune) go last."""
    if budget is None:
        return list(suites)
    late = registry.OPEN_ENDED
    return [s for s in suites if s not in late] + [s for s in late if s in suites]


def main(args) -> int:
    import torch

    from harness.bench import memory, profiles

    started = time.perf_counter()
    suites = registry.parse(args.suite)
    if args.shard:  # (whole suites: a suite's points and acceptance checks belong together)
        mine = options.in_shard(suites, args.shard)
        print(f"harness bench: shard {args.shard[0]}/{args.shard[1]}: suites {','.join(mine) or '(none)'} of "
              f"{','.join(suites)}", file=sys.stderr)
        if not mine:
            return 0
        suites = mine
    passes = parse_passes(getattr(args, "passes", None))
    if args.devices or args.device == "all":
        return _fan_out(args, suites, torch)
    device = args.device
    if device == "auto":
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    elif device == "cuda":
        device = "cuda:0"
    if device.startswith("cuda"):
        problem = _cuda_problem(device, torch)
        if problem:
            print(f"--device {device}: {problem}", file=sys.stderr)
            return 2
        # everything that uses the current device (CUDA events, triton's do_bench) must
        # see this one: with --device cuda:1 the events would otherwise time cuda:0
        torch.cuda.set_device(torch.device(device))
    profile = profiles.get(args.profile or ("gpu" if device.startswith("cuda") else "cpu"),
                           sizes=[int(s) for s in args.sizes.split(",")] if args.sizes else None,
                           passes=passes)
    # process-wide settings for the run, restored afterwards (bench may run inside pytest)
    threads_before = torch.get_num_threads()
    threads = args.threads or profile.threads
    if threads:
        torch.set_num_threads(threads)
    allocator = "default" if (args.no_keep_memory or device.startswith("cuda")) else memory.keep_freed_memory()
    try:
        return _run(args, suites, device, profile, allocator, started)
    finally:
        torch.set_num_threads(threads_before)
        if allocator != "default":
            memory.keep_freed_memory(False)


def _run(args, suites, device, profile, allocator, started) -> int:
    from harness.spec import conventions
    from harness.bench import TargetNotLoaded, open_target
    from harness.bench.store import ResultStore
    from harness.verdicts.runfolder import RunFolderError

    try:
        target = open_target(args.impl, device, suites, isolation=args.isolation, timeout=args.impl_timeout,
                             import_timeout=args.import_timeout, threads=args.threads or profile.threads,
                             cli_conventions=conventions.parse_cli(args.convention),
                             keep_memory=allocator != "default")
    except TargetNotLoaded as exc:
        print(f"harness bench: error: {exc} (no point was recorded in {args.out})", file=sys.stderr)
        return 2
    try:
        store = ResultStore(args.out, resume=args.resume, overwrite=getattr(args, "overwrite", False),
                            suites=suites)
    except RunFolderError as exc:
        target.close()
        print(f"harness bench: error: {exc}", file=sys.stderr)
        return 2
    try:
        return _measure(args, suites, device, profile, allocator, started, target, store)
    finally:
        store.close()
        target.close()


def _measure(args, suites, device, profile, allocator, started, target, store) -> int:
    from harness.bench import begin_run, env, receptive_field
    from harness.bench.points import PointRunner
    from harness.bench.scaling import fits as scaling_fits
    from harness.verdicts.runfolder import CHECKS, STATUSES

    budget = time_budget(args, profile)
    deadline = started + budget if budget is not None else None
    suites = order_for_budget(suites, budget)
    print(f"harness bench: target {args.impl}, device {device}, profile {profile.name}, "
          f"suites {','.join(suites)}" + (f", time budget {budget:g} s" if budget is not None else "")
          + f" -> {store.dir}", file=sys.stderr)
    if device.startswith("cuda") and extras.absent("pynvml"):
        print(f"harness bench: no GPU telemetry: {extras.missing_line('pynvml')}", file=sys.stderr)
    peak = env.measure_peak_tflops(device, size=profile.peak_size)
    ctx = begin_run(store, target, args.impl, device, profile, suites, peak=peak, cases=ctx_cases(args),
                    threads=args.threads, extra={"cases": list(ctx_cases(args)) or None,
                                                 "passes": list(profile.scaling.passes), "cpu_allocator": allocator,
                                                 "isolation": args.isolation, "time_budget_s": budget})
    ctx.state["deadline"] = deadline  # the CPU scaling sweep validates no size after it
    runner = PointRunner(store, args.impl, device, progress=False if args.no_progress else None, deadline=deadline,
                    budget_s=budget)
    if target.info.interpreted:  # Triton's interpreter: correct, ~1000x slower than compiled
        from harness.boundary.interpret import BENCH_SKIP
        runner.skip_all = BENCH_SKIP
    ctx.record = runner.record  # a CPU sweep writes each size as soon as it is timed
    checks = []
    for name in suites:
        module = registry.module(name)
        # the profile's default budget is for the benchmark suites; finetune (minutes of
        # training by design) is cut only by an explicit --time-budget-s
        runner.deadline = deadline if (name != "finetune" or args.time_budget_s is not None) else None
        runner.run(module.points(ctx), desc=name)
        checks += module.summary(ctx, store.rows())
    rows = store.rows()
    fits = scaling_fits(rows)
    if fits or "scaling" in suites:
        store.write_json("fits.json", fits)
    if "receptive_field" in suites:
        receptive_field.write_grad_csv(store.dir, rows)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    wall = time.perf_counter() - started
    print(f"\nharness bench: {len(rows)} points ({', '.join(f'{k} {v}' for k, v in counts.items() if v)}) "
          f"in {wall:.1f} s -> {store.dir}")
    for key, f in sorted(fits.items()):
        ci = f["ci95"]
        ci_text = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "n/a"
        print(f"  fit {key}: exponent {f['exponent']:.3f}, 95% CI {ci_text}, n {f['n_range'][0]}..{f['n_range'][1]}")
    if checks:
        print("acceptance checks:")
        for c in checks:
            print(c.line())
    store.write_json(CHECKS, [dataclasses.asdict(c) for c in checks])  # (read by `harness run`)
    failed = [c for c in checks if c.passed is False]
    return 1 if (args.strict and failed) else 0
