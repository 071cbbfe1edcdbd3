"""``bench``: benchmark a target on the reference model set; writes a run folder.

    python -m harness bench --impl TARGET --suite scaling,receptive_field,kv_cache \\
        --out runs/today [--profile cpu|gpu|tiny] [--resume]

The run folder (notes/RESULTS_SCHEMA.md): env.json (written first), results.jsonl
(one row per point, flushed as measured), fits.json and receptive_field_grad.csv at
the end. A point that fails (exception, NaN output, out of memory) is recorded with
its status and reason and the run goes on. Exit status 0 when the run completed;
with ``--strict``, 1 when an acceptance check failed.
"""
from __future__ import annotations

import sys
import time

SUITE_MODULES = {
    "scaling": "harness.bench.scaling",
    "receptive_field": "harness.bench.receptive_field",
    "kv_cache": "harness.bench.kv_cache",
    "timer_selfcheck": "harness.bench.timer_selfcheck",
    "finetune": "harness.bench.finetune",   # BERT fine-tuning (its own module and profiles)
}
#: what ``--suite all`` runs (finetune needs its data and minutes of training: name it)
ALL_SUITES = ["scaling", "receptive_field", "kv_cache", "timer_selfcheck"]


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark a target: scaling, receptive field, KV cache")
    p.add_argument("--impl", default="reference", metavar="TARGET",
                   help="module path or .py file (default: reference)")
    p.add_argument("--suite", default="scaling,receptive_field,kv_cache",
                   help="comma-separated: scaling, receptive_field, kv_cache, timer_selfcheck, finetune; "
                        "all = the first four")
    p.add_argument("--out", required=True, metavar="DIR", help="the run folder")
    p.add_argument("--profile", default=None, choices=["cpu", "gpu", "tiny"],
                   help="sizes and budgets (default: gpu when the device is CUDA, else cpu)")
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N, auto (default), or all: one worker per CUDA device")
    p.add_argument("--devices", default=None, metavar="LIST",
                   help="one worker per listed device, e.g. cuda:0,cuda:1 (suites round-robin; "
                        "each worker writes OUT/worker<i>_<device>)")
    p.add_argument("--resume", action="store_true",
                   help="keep the points already measured ok in DIR/results.jsonl, measure the rest")
    p.add_argument("--cases", default=None,
                   help="comma-separated case names to run (default: all of each suite)")
    p.add_argument("--sizes", default=None, help="override the scaling sizes, e.g. 512,1024,2048")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: the profile's; cpu profile: 1)")
    p.add_argument("--no-keep-memory", action="store_true",
                   help="CPU: leave glibc returning freed memory to the kernel (timings then "
                        "include page faults); see harness/bench/memory.py")
    p.add_argument("--convention", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--strict", action="store_true", help="exit 1 when an acceptance check fails")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=main)


def _suites(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return list(ALL_SUITES)
    unknown = [s for s in names if s not in SUITE_MODULES]
    if unknown:
        raise SystemExit(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(SUITE_MODULES)}")
    return names


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
                        ("--threads", args.threads)):
        if value is not None:
            argv += [flag, str(value)]
    for flag, on in (("--resume", args.resume), ("--no-keep-memory", args.no_keep_memory),
                     ("--strict", args.strict), ("--no-progress", args.no_progress)):
        if on:
            argv.append(flag)
    for conv in args.convention:
        argv += ["--convention", conv]
    return devices.launch(argv, suites, chosen, args.out)


def main(args) -> int:
    import torch

    from harness.bench import memory, profiles

    started = time.perf_counter()
    suites = _suites(args.suite)
    if args.devices or args.device == "all":
        return _fan_out(args, suites, torch)
    device = args.device
    if device == "auto":
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    elif device == "cuda":
        device = "cuda:0"
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("--device cuda: CUDA is not available", file=sys.stderr)
        return 2
    profile = profiles.get(args.profile or ("gpu" if device.startswith("cuda") else "cpu"),
                           sizes=[int(s) for s in args.sizes.split(",")] if args.sizes else None)
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
    import importlib

    from harness import conventions
    from harness.bench import Context, env, receptive_field
    from harness.bench.runner import Runner
    from harness.bench.scaling import fits as scaling_fits
    from harness.bench.store import ResultStore
    from harness.loader import load_target

    target = load_target(args.impl, conventions.parse_cli(args.convention), device)
    if target.load_error:
        print(f"warning: target {args.impl!r} does not load; its cases will be recorded as errors:\n"
              f"{target.load_error}", file=sys.stderr)
    store = ResultStore(args.out, resume=args.resume)
    print(f"harness bench: target {args.impl}, device {device}, profile {profile.name}, "
          f"suites {','.join(suites)} -> {store.dir}", file=sys.stderr)
    peak = env.measure_peak_tflops(device, size=profile.peak_size)
    env.write(store.dir, env.collect(device, argv=sys.argv, peak=peak,
                                     extra={"profile": profile.name, "impl": args.impl,
                                            "suites": suites, "cpu_allocator": allocator}))
    ctx = Context(target=target, impl=args.impl, device=device, profile=profile, store=store,
                  peak_tflops=peak,
                  cases=tuple(c.strip() for c in args.cases.split(",")) if args.cases else None)
    runner = Runner(store, args.impl, device, progress=not args.no_progress)
    checks = []
    for name in suites:
        module = importlib.import_module(SUITE_MODULES[name])
        runner.run(module.points(ctx), desc=name)
        checks += module.summary(ctx, store.rows())
    rows = store.rows()
    fits = scaling_fits(rows)
    if fits or "scaling" in suites:
        store.write_json("fits.json", fits)
    if "receptive_field" in suites:
        receptive_field.write_grad_csv(store.dir, rows)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("ok", "skipped", "oom", "nan", "error")}
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
    failed = [c for c in checks if c.passed is False]
    return 1 if (args.strict and failed) else 0
