"""``check``: run the conformance suites against targets and write the conformance report.

``--jobs`` spreads one run over pytest-xdist workers (each with its own target worker under
``--isolation process``): the rows travel in the test reports (``harness.verdicts.session_rows``), so
the report is the same as one process's, and every property draws the same examples (the ci
profile is derandomized; the dev profile takes the seed given).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.basics import heap, options

SUITES = options.SUITES


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="run the conformance suites (pytest) against --impl targets")
    options.add_impl(p, repeatable=True)
    p.add_argument("--report", default=None, metavar="DIR", help="write the conformance table into DIR")
    p.add_argument("--convention", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--hypothesis-profile", "--profile", dest="profile", default=None,
                   choices=["ci", "dev", "thorough"],
                   help="the Hypothesis profile, as `run --hypothesis-profile` (default: ci when $CI is "
                        "set, else dev); --profile is the older spelling")
    options.add_isolation(p, "process (default): each target in its own worker process; none: in this "
                             "process, for debugging with pdb")
    options.add_jobs(p)
    options.add_impl_timeout(p)
    options.add_import_timeout(p)
    options.add_triton_interpret(p)
    p.add_argument("--require-consistent", action="store_true",
                   help="several --impl targets (one library's backends): exit 1 when they measure different "
                        "conventions or give different outputs on the same inputs (the consistency section)")
    p.add_argument("--xfails", default=None, metavar="FILE",
                   help="properties known to fail, one 'PROPERTY [TARGET]  # why' a line: reported XFAIL "
                        "(visible, the run passes); a failure not listed fails the run (docs/ci.md)")
    p.add_argument("-k", dest="keyword", default=None, help="only properties matching this pytest -k expression")
    p.add_argument("--shard", type=options.shard, default=None, metavar="K/N",
                   help="run the K-th of N parts of the properties (a CI matrix job, each with its own --report); "
                        "--merge joins the reports")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="join these --report folders (the shards) into --report, print the table and exit 1 "
                        "on a failure; runs nothing")
    p.add_argument("pytest_args", nargs="*", help="extra arguments passed to pytest (after --)")
    p.set_defaults(func=main)


def pytest_argv(args) -> list[str]:
    argv = [str(SUITES), "-p", "no:cacheprovider", "-q", "-rfE",
            # its two full collections at the end cost ~0.8 s a process; a target's unraisable
            # exceptions are not the harness's business (harness.basics.heap)
            "-p", "no:unraisableexception",
            # the suites raise AssertionErrors with their own messages: pytest's rewriting of every
            # suite module (recompiled on each run where bytecode is not cached) would buy nothing
            "--assert=plain",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",  # harness is imported before pytest
            "--ignore", str(SUITES / "benchmarks")]  # timings belong to `bench`, not conformance
    for spec in options.targets(args):
        argv += ["--impl", spec]
    for conv in args.convention:
        argv += ["--convention", conv]
    if args.report:
        argv += ["--conformance-report", args.report]
    argv += ["--isolation", args.isolation]
    if args.impl_timeout is not None:
        argv += ["--impl-timeout", str(args.impl_timeout)]
    if args.import_timeout is not None:
        argv += ["--import-timeout", str(args.import_timeout)]
    if getattr(args, "triton_interpret", False):
        argv += ["--triton-interpret"]
    if args.profile:
        argv += ["--hypothesis-profile", f"harness-{args.profile}"]
    if getattr(args, "require_consistent", False):
        argv += ["--require-consistent"]
    if getattr(args, "xfails", None):
        argv += ["--xfails", args.xfails]
    if args.keyword:
        argv += ["-k", args.keyword]
    if getattr(args, "shard", None):
        argv += ["--shard", f"{args.shard[0]}/{args.shard[1]}"]
    n = options.jobs(getattr(args, "jobs", 1), list(args.pytest_args), args.keyword)  # (programmatic callers: one process)
    if n > 1:
        # worksteal: the properties' times differ by 100x (a BERT model's dependency check against a
        # norm's passthrough); an idle worker takes queued ones from a busy one
        argv += ["-n", str(n), "--dist", "worksteal"]
    return argv + list(args.pytest_args)


def merge(args) -> int:
    """``check --merge``: the shards' reports as one (exit 1 when a cell failed or errored)."""
    from harness.verdicts import conformance_table as ct
    if not args.report:
        print("check --merge: give --report DIR for the joined report", file=sys.stderr)
        return 2
    try:
        rows = ct.merge(args.merge)
    except FileNotFoundError as exc:
        print(f"check --merge: {exc}", file=sys.stderr)
        return 2
    paths = ct.write_conformance(rows, args.report)
    table, hidden = ct.terminal_table(rows)
    print(table.to_markdown() if not table.empty else "(no results)")
    if hidden:
        print(f"{hidden} row(s) where every target was skipped are hidden (the written report keeps them)")
    print("\n".join(ct.summary_lines(rows)))
    print(f"check --merge: {len(args.merge)} report(s) -> {', '.join(str(p) for p in paths)}")
    return 1 if any(ct.cell(r)[2] in ("fail", "error") for r in rows) else 0


def main(args) -> int:
    if getattr(args, "merge", None):
        return merge(args)
    import pytest
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault(heap.ENV, "settle")  # (this process's pytest and its xdist workers)
    try:
        argv = pytest_argv(args)
    except ValueError as exc:
        print(f"check: error: {exc}", file=sys.stderr)
        return 2
    n = options.jobs(args.jobs, list(args.pytest_args), args.keyword)  # (as pytest_argv resolved it)
    if n > 1:
        if args.isolation == "process" and 2 * n > options.cores():  # no core to spare for waiting on a reply
            os.environ.setdefault("HARNESS_SPIN_S", "0")
        print(f"check: {n} pytest-xdist workers (--jobs {args.jobs}; --jobs 1 runs in one process)", flush=True)
    code = int(pytest.main(argv))
    if args.report and code in (0, 1) and not (Path(args.report) / "conformance.json").is_file():
        print(f"check: pytest ended (exit {code}) without writing the conformance report into "
              f"{args.report}: no property result can be trusted", file=sys.stderr)
        return 3
    return code
