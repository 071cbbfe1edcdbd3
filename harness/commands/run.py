"""``run``: the main job end to end: conformance, a benchmark sweep, and the report.

    python -m harness run --impl reference --out runs/quickstart

is ``check --report OUT/conformance`` + ``bench --out OUT`` (scaling, receptive field, KV cache)
+ ``bench --suite finetune --cases majority_class,reference --out OUT/finetune`` (the BERT
fine-tune at the same profile: cpu = 2,000 examples x 3 seeds) + ``report OUT --html`` (which
reads OUT and its sub-folder run OUT/finetune). ``--finetune-swaps`` adds the target's SDPA and
LayerNorm swap-ins (three more trainings each); ``--no-finetune`` leaves the fine-tune out.
Each stage runs in its own process. The exit status is non-zero when a property fails or, with
``--baseline``, the report's gate fails (``--gate-cases``, ``--allow-missing`` and ``--strict`` are
passed to it);
every stage still runs so the report shows everything. A bench stage's failed acceptance check
(its ``checks.json``) is named in the summary instead of "ok"; it leaves the exit status as it is
(``bench --strict`` gates on the checks). An OUT that holds benchmark results
already is refused (exit 2, before any stage) unless ``--overwrite`` (start again) or
``--resume`` (the bench stages keep their ok points).
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.basics import options
from harness.bench import suites as registry


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="conformance + benchmarks + report in one go")
    options.add_impl(p, repeatable=True)
    p.add_argument("--out", default="runs/quickstart", metavar="DIR")
    p.add_argument("--profile", default="cpu", help="benchmark profile: tiny, cpu or gpu (default cpu)")
    p.add_argument("--suite", default=",".join(registry.DEFAULT),
                   help="benchmark suites (comma-separated)")
    p.add_argument("--baseline", default=None, metavar="DIR",
                   help="compare with a stored baseline; a regression makes the exit status 1")
    p.add_argument("--no-finetune", action="store_true", help="leave out the BERT fine-tune stage")
    p.add_argument("--finetune-swaps", action="store_true",
                   help="also fine-tune with the target's SDPA and LayerNorm swapped in")
    p.add_argument("--hypothesis-profile", default="ci", choices=["ci", "dev", "thorough"])
    p.add_argument("--xfails", default=None, metavar="FILE",
                   help="conformance stage: properties known to fail (check --xfails; docs/ci.md)")
    p.add_argument("-k", dest="keyword", default=None,
                   help="conformance stage: only properties matching this pytest -k expression (check -k)")
    p.add_argument("--gate-cases", default=None, choices=["target", "all"],
                   help="report --cases: what the baseline gate judges (default: the target's own cases)")
    p.add_argument("--allow-missing", action="store_true",
                   help="report --allow-missing: baseline points the job lacks are not regressions")
    options.add_strict_gate(p, help="report --strict: " + options.STRICT_GATE_HELP)
    p.add_argument("--no-progress", action="store_true",
                   help="bench stages: no progress bars, a plain line per finished point (the default "
                        "when stderr is not a terminal)")
    options.add_resume_overwrite(p, "keep an earlier job's ok benchmark points in OUT, measure the rest",
                                 "discard the benchmark results of an earlier job in OUT")
    p.set_defaults(func=main)


def stage(argv: list[str]) -> int:
    """One stage, ``python -m harness ARGV``, in a fresh process: a benchmark must not inherit
    what the conformance run left in the allocator and the imported modules (measured here: the
    float64 reference at n = 4096 ran 2.2x slower after an in-process conformance run)."""
    return subprocess.call([sys.executable, "-m", "harness", *argv])


def earlier_results(out: str) -> list[Path]:
    """The run folders of OUT (the bench's and the fine-tune's) that hold results."""
    from harness.verdicts.runfolder import RESULTS
    return [f for f in (Path(out) / RESULTS, Path(out) / "finetune" / RESULTS)
            if f.is_file() and f.read_text().strip()]


def failed_checks(folder: str) -> list[str]:
    """The names of the acceptance checks that failed in the bench run folder ``folder`` (its
    ``checks.json``; none when it wrote none)."""
    import json

    from harness.verdicts.runfolder import CHECKS
    path = Path(folder) / CHECKS
    try:
        checks = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [c.get("name", "?") for c in checks if isinstance(c, dict) and c.get("passed") is False]


def verdict(code: int, failed: list[str]) -> str:
    """A stage's word in the summary: ok, its exit status, or the acceptance checks that failed."""
    if code != 0:
        return f"exit {code}"
    if failed:
        return f"FAILED {len(failed)} acceptance check(s) ({'; '.join(failed)})"
    return "ok"


def main(args) -> int:
    impls = options.targets(args)
    impl_args = [a for spec in impls for a in ("--impl", spec)]
    found = earlier_results(args.out)
    if found and not (args.overwrite or args.resume):
        print(f"harness run: error: {args.out} holds an earlier job's results ({', '.join(map(str, found))}). "
              f"Give --overwrite to discard them, --resume to keep their ok points, or another --out.",
              file=sys.stderr)
        return 2
    again = ["--overwrite"] if args.overwrite else ["--resume"] if args.resume else []
    again += ["--no-progress"] if args.no_progress else []
    gate = ([f"--cases={args.gate_cases}"] if args.gate_cases else []) + \
        (["--allow-missing"] if args.allow_missing else []) + (["--strict"] if args.strict else [])
    status, failed = {}, {}
    stages = [
        ("conformance", ["check", *impl_args, "--report", f"{args.out}/conformance",
                         "--hypothesis-profile", args.hypothesis_profile,
                         *(["--xfails", args.xfails] if args.xfails else []),
                         *(["-k", args.keyword] if args.keyword else [])]),
        ("benchmarks", ["bench", "--impl", impls[0], "--suite", args.suite, "--out", args.out,
                        "--profile", args.profile, *again]),
        ("finetune", ["bench", "--impl", impls[0], "--suite", "finetune", "--out", f"{args.out}/finetune",
                      "--profile", args.profile, "--cases",
                      "majority_class,reference" + (",swap.sdpa,swap.layernorm" if args.finetune_swaps else ""),
                      *again]),
        ("report", ["report", args.out, "--out", f"{args.out}/report", "--html",
                    *(["--baseline", args.baseline, *gate] if args.baseline else [])]),
    ]
    if args.no_finetune:
        stages = [st for st in stages if st[0] != "finetune"]
        stale = Path(args.out) / "finetune"
        if stale.is_dir() and not args.resume:  # an earlier job's: the report would read it
            shutil.rmtree(stale)
    for name, argv in stages:
        print(f"\n=== {name}: {shlex.join(['python', '-m', 'harness', *argv])}", flush=True)
        start = time.perf_counter()
        status[name] = stage(argv)
        if name == "conformance" and status[name] == 0 and not (Path(args.out) / "conformance" / "conformance.json").is_file():
            print("=== conformance exited 0 but wrote no conformance report: the process ended early "
                  "(os._exit in a target run with --isolation none?); counted as failed", flush=True)
            status[name] = 3
        if argv[0] == "bench" and status[name] == 0:
            failed[name] = failed_checks(argv[argv.index("--out") + 1])
        print(f"=== {name} finished in {time.perf_counter() - start:.0f} s (exit {status[name]})"
              + (f"; acceptance check(s) FAILED: {'; '.join(failed[name])}" if failed.get(name) else ""),
              flush=True)
    print("\nsummary: " + ", ".join(f"{k} {verdict(v, failed.get(k, []))}" for k, v in status.items()))
    print(f"report: {args.out}/report/report.html")
    return 0 if all(v == 0 for v in status.values()) else 1
