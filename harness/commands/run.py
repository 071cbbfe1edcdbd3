"""``run``: the main job end to end: conformance, a benchmark sweep, and the report.

    python -m harness run --impl reference --out runs/quickstart

is ``check --report OUT/conformance`` + ``bench --out OUT`` + ``report OUT --html``.
The exit status is non-zero when a property fails or, with ``--baseline``, a metric
regresses; every stage still runs so the report shows everything.
"""
from __future__ import annotations

import time


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="conformance + benchmarks + report in one go")
    p.add_argument("--impl", action="append", default=None, metavar="TARGET")
    p.add_argument("--out", default="runs/quickstart", metavar="DIR")
    p.add_argument("--profile", default="cpu", help="benchmark profile: tiny, cpu or gpu (default cpu)")
    p.add_argument("--suite", default="scaling,receptive_field,kv_cache",
                   help="benchmark suites (comma-separated)")
    p.add_argument("--baseline", default=None, metavar="DIR",
                   help="compare with a stored baseline; a regression makes the exit status 1")
    p.add_argument("--hypothesis-profile", default="ci", choices=["ci", "dev", "thorough"])
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.cli import main as cli

    impls = args.impl or ["reference"]
    impl_args = [a for spec in impls for a in ("--impl", spec)]
    status = {}
    stages = [
        ("conformance", ["check", *impl_args, "--report", f"{args.out}/conformance",
                         "--profile", args.hypothesis_profile]),
        ("benchmarks", ["bench", "--impl", impls[0], "--suite", args.suite, "--out", args.out,
                        "--profile", args.profile]),
        ("report", ["report", args.out, "--out", f"{args.out}/report", "--html",
                    *(["--baseline", args.baseline] if args.baseline else [])]),
    ]
    for name, argv in stages:
        print(f"\n=== {name}: python -m harness {' '.join(argv)}", flush=True)
        start = time.perf_counter()
        status[name] = cli(argv)
        print(f"=== {name} finished in {time.perf_counter() - start:.0f} s (exit {status[name]})", flush=True)
    print("\nsummary: " + ", ".join(f"{k} {'ok' if v == 0 else f'exit {v}'}" for k, v in status.items()))
    print(f"report: {args.out}/report/report.html")
    return 0 if all(v == 0 for v in status.values()) else 1
