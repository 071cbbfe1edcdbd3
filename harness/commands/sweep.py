"""``sweep``: prove no false alarm: every correct control under random Hypothesis seeds.

    python -m harness sweep --seeds 5 --thorough --out runs/sweep
    python -m harness sweep --targets reference torch.nn --seed 3 -k "layernorm or rope" --out /tmp/sw

The controls are ``harness.controls.CONTROLS`` (``--targets`` picks some). Each (profile, seed) is
run by ``check``'s pytest command line (``check.pytest_argv``) in a pytest process of its own,
``--group target`` (default) one process per target, ``--group seed`` one per seed with every
target as an ``--impl`` (its consistency section is printed; not alarms: different libraries).
The cells come from each session's ``conformance.json``; ``harness.verdicts.sweep_table`` counts them and
writes sweep.csv / sweep.md / sweep.json into ``--out``. Exit 1 on any alarm (a ``fail`` or
``error`` cell of a control), 2 when nothing ran, 130 when Ctrl-C stopped it first, else 0.

A CI matrix splits one sweep (issue 49): every job runs the same plan with ``--shard K/N`` (given seeds,
``--thorough-seed`` for the thorough run: fresh random ones would differ per job) and does every N-th
session; ``sweep --merge DIR ... --out DIR`` joins the jobs' folders into the files of one sweep::

    python -m harness sweep --seed 11 --seed 22 --thorough-seed 33 --shard 2/4 --out shard-2
    python -m harness sweep --merge shard-1 shard-2 shard-3 shard-4 --out sweep
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import controls
from harness.basics import options
from harness.verdicts import sweep_table
from harness.commands import check

#: fresh random seeds are drawn below this (Hypothesis accepts any integer)
SEED_RANGE = 2**31


def add_parser(sub) -> None:
    p = sub.add_parser("sweep", help="run every correct control under random seeds: no false alarm")
    p.add_argument("--targets", nargs="+", default=None, metavar="SPEC",
                   help="controls to run (default: all of harness.controls.CONTROLS)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, metavar="N",
                   help="one number N: N fresh random seeds (printed); several: those seeds (default: 5)")
    p.add_argument("--seed", action="append", type=int, default=[], metavar="N",
                   help="exactly this seed (repeatable; with --seeds, added to them)")
    p.add_argument("--thorough", action="store_true",
                   help="also one run under harness-thorough (10x the examples), at a fresh random seed")
    p.add_argument("-k", dest="keyword", default=None, help="only properties matching this pytest -k expression")
    p.add_argument("--out", default="sweep", metavar="DIR", help="sweep.csv/md/json and each session's "
                   "report and log (default: ./sweep)")
    p.add_argument("--group", choices=["target", "seed"], default="target",
                   help="target (default): one pytest process per (target, seed), progress per target; "
                        "seed: one per seed with every target, adds the consistency section")
    p.add_argument("--jobs", type=int, default=1, help="pytest processes at once (default 1)")
    p.add_argument("--thorough-seed", type=int, default=None, metavar="N",
                   help="the thorough run at this seed (implies --thorough)")
    p.add_argument("--shard", type=options.shard, default=None, metavar="K/N",
                   help="run the K-th of N parts of the sessions (a CI matrix job; seeds must be given)")
    p.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                   help="join these sweeps' --out folders (the shards) into --out, and run nothing")
    options.add_impl_timeout(p)
    p.set_defaults(func=main)


@dataclass
class SweepSession:
    profile: str                    # dev | thorough
    seed: int
    specs: list[str]
    folder: Path
    started: float = 0.0
    proc: subprocess.Popen | None = None
    log: object = None

    @property
    def label(self) -> str:
        who = self.specs[0] if len(self.specs) == 1 else f"{len(self.specs)} targets"
        return f"{who} / {self.profile} seed {self.seed}"


def seeds_of(args) -> list[tuple[int, bool]]:
    """[(seed, fresh)]: ``--seeds N`` draws N fresh seeds, ``--seeds A B ...`` and ``--seed`` are kept."""
    given = args.seeds if args.seeds is not None else ([] if args.seed else [5])
    if len(given) == 1:
        rng = random.SystemRandom()
        drawn = [(rng.randrange(SEED_RANGE), True) for _ in range(given[0])]
    else:
        drawn = [(s, False) for s in given]
    return drawn + [(s, False) for s in args.seed]


def select(targets: list[str] | None) -> list[controls.Control]:
    known = controls.by_spec()
    if not targets:
        return list(controls.CONTROLS)
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise SystemExit(f"sweep: not a correct control: {', '.join(unknown)} (harness/controls.py lists "
                         f"them: {', '.join(known)})")
    return [known[t] for t in targets]


def pytest_command(session: SweepSession, args) -> list[str]:
    ns = argparse.Namespace(impl=session.specs, convention=[], report=str(session.folder / "report"),
                            isolation="process", impl_timeout=args.impl_timeout, import_timeout=None,
                            profile=session.profile, require_consistent=False, keyword=args.keyword,
                            pytest_args=[f"--hypothesis-seed={session.seed}"])
    return [sys.executable, "-m", "pytest", *check.pytest_argv(ns)]


def start(session: SweepSession, args) -> None:
    session.folder.mkdir(parents=True, exist_ok=True)
    report = session.folder / "report" / "conformance.json"
    if report.exists():
        report.unlink()  # a report of an earlier sweep must not stand in for this one
    session.log = open(session.folder / "pytest.log", "w")
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")  # as check
    session.started = time.monotonic()
    session.proc = subprocess.Popen(pytest_command(session, args), stdout=session.log,
                                    stderr=subprocess.STDOUT, env=env)


def finish(session: SweepSession, rc: int) -> tuple[list[dict], list[dict], list[str]]:
    session.log.close()
    seconds = time.monotonic() - session.started
    path = session.folder / "report" / "conformance.json"
    report = json.loads(path.read_text()) if path.is_file() and rc in (0, 1) else None
    why = "" if report is not None or rc == 5 else (
        f"pytest ended (exit {rc}: interrupted, an internal or usage error, or a crash) "
        f"{'with' if path.is_file() else 'without'} a conformance report: see {session.folder / 'pytest.log'}")
    if report is None and rc == 5:  # no test selected: nothing ran, nothing failed
        report = {"results": []}
    rows, alarms = sweep_table.session_rows(report, session.specs, session.profile, session.seed, seconds, why)
    return rows, alarms, sweep_table.disagreements(report)


def plan(chosen: list[controls.Control], runs: list[tuple[str, int]], args, out: Path):
    """(sessions to run, rows of the controls that cannot run here, alarms for missing required releases)."""
    runnable, rows, alarms = [], [], []
    for c in chosen:
        install = controls.not_installed(c)
        if install is None:
            runnable.append(c.spec)
            continue
        required = c.release is not None and controls.require_releases()
        status = f"missing (required by $HARNESS_REQUIRE_RELEASES): {install}" if required \
            else f"not run (install: {install})"
        for profile, seed in runs:
            rows.append(sweep_table.not_run_row(c.spec, profile, seed, status))
            if required:
                rows[-1]["alarms"], rows[-1]["alarm_properties"] = 1, "(release missing)"
                alarms.append({"property": "(release missing)", "target": c.spec, "profile": profile,
                               "seed": seed, "result": "error", "detail": status, "repro": install,
                               "rerun": install})
    sessions = []
    for profile, seed in runs:
        groups = [[s] for s in runnable] if args.group == "target" else ([runnable] if runnable else [])
        for specs in groups:
            name = f"{profile}-{seed}" + (f"/{specs[0].replace('/', '_')}" if args.group == "target" else "")
            sessions.append(SweepSession(profile, seed, specs, out / "sessions" / name))
    return sessions, rows, alarms


def commit() -> str | None:
    """The harness checkout's commit (for the figures on record), or None outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=check.SUITES.parent, text=True,
                              capture_output=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m{s:02d}s" if m >= 60 else f"{m}m{s:02d}s"


def run_all(sessions: list[SweepSession], args, t0: float):
    """(rows, alarms, consistency lines, whether Ctrl-C stopped it) of the sessions, ``--jobs`` at once."""
    rows, alarms, consistency = [], [], []
    pending, running = list(sessions), []
    try:
        _loop(sessions, pending, running, args, t0, rows, alarms, consistency)
    except KeyboardInterrupt:  # stop the sessions this sweep started; the files keep what finished
        for s in running:
            s.proc.terminate()
            s.proc.wait()
            s.log.close()
        print(f"\ninterrupted: {len(pending) + len(running)} session(s) not run or not finished", flush=True)
        return rows, alarms, consistency, True
    return rows, alarms, consistency, False


def _loop(sessions, pending, running, args, t0, rows, alarms, consistency) -> None:
    done = 0
    while pending or running:
        while pending and len(running) < max(1, args.jobs):
            s = pending.pop(0)
            start(s, args)
            running.append(s)
            print(f"[{len(sessions) - len(pending)}/{len(sessions)}] start {s.label} (log {s.folder / 'pytest.log'})",
                  flush=True)
        time.sleep(0.2)
        for s in [s for s in running if s.proc.poll() is not None]:
            running.remove(s)
            done += 1
            r, a, lines = finish(s, s.proc.returncode)
            rows += r
            alarms += a
            if lines:
                consistency.append({"profile": s.profile, "seed": s.seed, "lines": lines})
            run = sum(x["run"] for x in r)
            print(f"[{done}/{len(sessions)}] done  {s.label}: {run} property runs, {len(a)} alarm(s) "
                  f"in {clock(time.monotonic() - s.started)} (elapsed {clock(time.monotonic() - t0)})", flush=True)
            for line in sweep_table.alarm_lines(a):
                print("  " + line, flush=True)


def report(out: Path, rows, alarms, consistency, meta, t0: float, interrupted: bool, *, empty_ok: bool = False) -> int:
    """Write and print a sweep's files and summary; its exit status (``empty_ok``: a shard that got no
    session is no failure of its CI job)."""
    paths = sweep_table.write(out, rows, alarms, consistency, meta)
    print("\n" + (sweep_table.markdown(rows) if rows else "(no rows)"))
    if consistency:
        print("\nconsistency (not alarms: the controls are different libraries):")
        for c in consistency:
            for line in c["lines"]:
                print(f"  {c['profile']} seed {c['seed']}: {line}")
    if alarms:
        print(f"\n{len(alarms)} alarm(s):")
        for line in sweep_table.alarm_lines(alarms):
            print("  " + line)
    fig = sweep_table.figures(rows)
    print("\n" + sweep_table.figures_line(fig) + f" (in {clock(time.monotonic() - t0)})")
    print(f"sweep files: {', '.join(str(p) for p in paths)} (commit {meta['commit']})")
    if alarms:
        return 1
    if interrupted:
        return 130
    return 0 if fig["properties_run"] or empty_ok else 2


def merge(args) -> int:
    try:
        rows, alarms, consistency, meta = sweep_table.merge([Path(f) for f in args.merge])
    except FileNotFoundError as exc:
        print(f"sweep --merge: {exc}", file=sys.stderr)
        return 2
    print(f"sweep --merge: {len(args.merge)} folder(s), {len(rows)} row(s), {len(alarms)} alarm(s) -> {args.out}")
    return report(Path(args.out), rows, alarms, consistency, meta, time.monotonic(), meta["interrupted"])


def main(args) -> int:
    if args.merge:
        return merge(args)
    fresh = args.seeds is not None and len(args.seeds) == 1 or args.seeds is None and not args.seed
    thorough = args.thorough or args.thorough_seed is not None
    if args.shard and (fresh or (args.thorough and args.thorough_seed is None)):
        print("sweep: --shard needs the same plan in every shard: give the seeds (--seeds A B ..., --seed N) and "
              "--thorough-seed N for a thorough run (fresh random seeds differ per job)", file=sys.stderr)
        return 2
    chosen = select(args.targets)
    seeds = seeds_of(args)
    runs = [("dev", s) for s, _ in seeds]
    if thorough:
        runs.append(("thorough", args.thorough_seed if args.thorough_seed is not None
                     else random.SystemRandom().randrange(SEED_RANGE)))
    out = Path(args.out)
    if not runs:
        print("sweep: no seed and no --thorough: nothing to run", file=sys.stderr)
        return 2
    for seed, fresh in seeds:
        print(f"harness-dev seed {seed}" + (" (fresh random)" if fresh else ""), flush=True)
    if thorough:
        print(f"harness-thorough seed {runs[-1][1]}" + ("" if args.thorough_seed is not None else " (fresh random)"),
              flush=True)
    sessions, rows, alarms = plan(chosen, runs, args, out)
    if args.shard:  # (the rows of controls that cannot run here: the first shard's, once)
        every = len(sessions)
        sessions = options.in_shard(sessions, args.shard)
        if args.shard[0] != 1:
            rows, alarms = [], []
        print(f"shard {args.shard[0]}/{args.shard[1]}: {len(sessions)} of the plan's {every} session(s)", flush=True)
    for r in rows:
        if r["profile"] == runs[0][0] and r["seed"] == runs[0][1]:
            print(f"{r['target']}: {r['status']}", flush=True)
    print(f"{len(chosen)} controls, {len(runs)} runs each: {len(sessions)} pytest session(s) "
          f"(--group {args.group}, --jobs {args.jobs}); -k {args.keyword!r}", flush=True)
    t0, at_start = time.monotonic(), commit()
    got = run_all(sessions, args, t0)
    rows, alarms, consistency, interrupted = rows + got[0], alarms + got[1], got[2], got[3]
    at_end = commit()
    # each session runs the checkout as it is when it starts: a commit made during a long sweep shows
    meta = {"commit": at_start if at_start == at_end else f"{at_start}..{at_end}", "interrupted": interrupted, "profiles": [{"profile": p, "seed": s} for p, s in runs],
            "keyword": args.keyword, "group": args.group, "targets": [c.spec for c in chosen],
            "seconds": round(time.monotonic() - t0, 1)}
    if args.shard:
        meta["shard"] = f"{args.shard[0]}/{args.shard[1]}"
    return report(out, rows, alarms, consistency, meta, t0, interrupted, empty_ok=bool(args.shard) and not sessions)
