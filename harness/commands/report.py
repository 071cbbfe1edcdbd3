"""``report``: tables, plots, an HTML page and a baseline comparison from run folders.

    python -m harness report RUN_DIR [RUN_DIR|BENCH.json ...] [--baseline DIR|NAME]
                             [--cases target|all] [--allow-missing] [--strict]
                             [--out DIR] [--html] [--formats csv,parquet,md] [--no-plots]

Inputs are run folders (notes/RESULTS_SCHEMA.md) or pytest-benchmark ``--benchmark-json`` files; several
merge into one report (``run_id``/``machine`` columns). The baseline gate (reports/gate.py) passes
only on what it compared; a point it cannot decide (too noisy, or CPU memory below the probe's
resolution) is "undecided", counted, and fails it only with ``--strict``. Exit status: 0 no
regression; 1 a regression in the gate's scope (a worse metric, a metric with no value now, a point
that failed, a missing point; with ``--strict`` an undecided one); 2 usage or input error:
an unreadable or empty baseline, a row that breaks the schema (an unknown status...), or nothing in
scope to compare (the message names the problem).
"""
from __future__ import annotations

import sys
import traceback
import warnings
from pathlib import Path

from harness.basics import extras, layout, options

BASELINES = layout.BASELINES


def add_parser(sub) -> None:
    p = sub.add_parser("report", help="tables, plots, HTML and a baseline comparison from run folders",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run folder (results.jsonl, env.json, ...) or pytest-benchmark JSON file")
    p.add_argument("--baseline", default=None, metavar="DIR",
                   help="a baseline run folder's path (e.g. ci/baselines/cpu in your repository), or the NAME "
                        "of a baseline the harness stores (cpu-reference, gpu-h200)")
    p.add_argument("--cases", default=None, choices=["target", "all"],
                   help="what the baseline gate judges: target (default) = the rows of the target's own "
                        "code, the built-in reference's too (the harness's comparison kernels and the "
                        "machine drift are shown, not gated); all = every row")
    p.add_argument("--allow-missing", action="store_true",
                   help="a baseline point the run lacks (or skipped) is not a regression (default: it is; "
                        "a killed run lacks points)")
    options.add_strict_gate(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: RUN_DIR/report of the first run)")
    p.add_argument("--html", action="store_true", help="also write one self-contained report.html")
    p.add_argument("--formats", default="csv,parquet,md", metavar="LIST",
                   help="table formats, comma-separated from csv,parquet,md (default: all)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots (and the HTML's figures)")
    p.set_defaults(func=main)


def _fail(message: str) -> int:
    print(f"harness report: error: {message}", file=sys.stderr)
    return 2


def resolve_baseline(spec: str) -> Path:
    """``--baseline``: a run folder's path, else the name of a baseline the harness stores
    (``cpu-reference``; ``reports/baselines/NAME``, the checkout's path, is read as that name
    wherever the harness is installed). Raises InputError naming both when neither exists."""
    from harness.reports.load import InputError
    path = Path(spec)
    if path.exists() or path.is_absolute():
        return path
    name = spec.removeprefix("reports/baselines/").strip("/")
    if name and (BASELINES / name).exists():
        return BASELINES / name
    stored = sorted(p.name for p in BASELINES.iterdir() if p.is_dir()) if BASELINES.is_dir() else []
    raise InputError(f"--baseline {spec}: no run folder at {path.resolve()}, and no stored baseline of that "
                     f"name (stored: {', '.join(stored) or 'none'}). Keep a baseline of your own: a bench run "
                     f"folder in your repository, passed by its path (docs/ci.md)")


def default_out(first: Path) -> Path:
    return first / "report" if first.is_dir() else first.with_name(f"{first.stem}_report")


def main(args) -> int:
    try:
        return _main(args)
    except Exception as exc:  # noqa: BLE001 -- never let a crash read as exit 1 ("regression")
        hint = extras.hint_for(exc)
        if hint:  # an optional dependency the checks below did not foresee: the install line, no traceback
            return _fail(hint)
        traceback.print_exc()
        return _fail("internal error while building the report (traceback above)")


def missing_extra(formats, plots: bool) -> str | None:
    """The install line of an optional dependency this report needs and lacks (extra "report"), with
    the option that does without it; None when it has them all. Checked before anything is written."""
    if "parquet" in formats and extras.absent("pyarrow"):
        return extras.missing_line("pyarrow") + " (or leave them out: --formats " + \
            (",".join(f for f in formats if f != "parquet") or "csv") + ")"
    for module in ("matplotlib", "seaborn"):
        if plots and extras.absent(module):
            return extras.missing_line(module) + " (or leave them out: --no-plots)"
    return None


def _main(args) -> int:
    from harness.verdicts.runfolder import locked_by
    from harness.reports import gate, tables
    from harness.reports.load import InputError, load_runs, point_samples, requested, tidy

    try:
        formats = tables.parse_formats(args.formats)
    except ValueError as exc:
        return _fail(str(exc))
    if missing := missing_extra(formats, not args.no_plots):
        return _fail(missing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            runs = load_runs(args.runs)
            baseline_runs = load_runs([resolve_baseline(args.baseline)]) if args.baseline else None
        except InputError as exc:  # (resolve_baseline's too)
            return _fail(str(exc))
    for w in caught:
        print(f"harness report: warning: {w.message}", file=sys.stderr)
    for run in runs:
        holder = locked_by(run.path) if run.kind == "run" else None
        if holder:
            print(f"harness report: warning: {run.path} is still being written ({holder}): its "
                  f"points so far are reported", file=sys.stderr)
    df = tidy(runs)
    if df.empty:
        return _fail(f"no result rows in {', '.join(args.runs)}")
    base_df = None
    if baseline_runs is not None:
        base_df = tidy(baseline_runs)
        if base_df.empty:
            return _fail(f"the baseline {resolve_baseline(args.baseline)} holds no result rows: a gate "
                         f"against it would compare nothing")
    out = Path(args.out) if args.out else default_out(Path(args.runs[0]))
    summaries = tables.summary_tables(df)
    written = tables.write_tables(df, out, formats, summaries)

    comparison, code, baseline_name, result = None, 0, None, None
    if base_df is not None:
        baseline_name = str(resolve_baseline(args.baseline))
        scope = args.cases or "target"
        result = gate.gate(df, base_df, scope=scope, allow_missing=args.allow_missing,
                              requested=requested(runs), strict=args.strict,
                              current_samples=point_samples(runs),
                              baseline_samples=point_samples(baseline_runs))
        comparison = result.table
        regs = result.regressions()
        written += tables.write_frame(comparison, out, "comparison", formats, "Baseline comparison")
        written += tables.write_frame(regs, out, "regressions", formats, "Regressions")
        code = result.code

    plots = []
    if not args.no_plots:
        from harness.reports.plots import make_plots
        plots = make_plots(df, runs, out / "plots")
        written += [p.path for p in plots]
    if args.html:
        from harness.reports.html import write_html
        written.append(write_html(out / "report.html", runs=runs, df=df, tables=summaries, plots=plots,
                                  comparison=comparison, baseline=baseline_name))

    n_points = len(df.drop_duplicates(["run_id", "key"]))
    print(f"report: {n_points} points from {len(runs)} run(s) -> {out} ({len(written)} files)")
    for suite, table in summaries.items():
        bad = table[table["status"] != "ok"]
        print(f"  {suite}: {len(table)} points" + (f", {len(bad)} not ok" if len(bad) else ""))
    if result is not None:
        counts = gate.counts(comparison)
        print(f"baseline {baseline_name}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        print(f"gate: --cases {result.scope}{'' if args.cases else ' (default)'}"
              f"{', --allow-missing' if args.allow_missing else ''}{', --strict' if args.strict else ''}: "
              f"{result.matched} point(s) in scope compared" +
              (f"; {counts[gate.UNGATED]} worse row(s) outside the gate (--cases all "
               f"gates them)" if counts.get(gate.UNGATED) else ""))
        if line := gate.detectable_summary(comparison):
            print(f"gate: {line}")
        undecided = result.undecided()
        if len(undecided):
            how = ", failing the gate (--strict)" if args.strict else "; --strict fails on them"
            print(f"UNDECIDED ({len(undecided)} row(s) in scope{how}):")
            cols = (["run_id"] if len(runs) > 1 else []) + ["key", "metric", "verdict", "note"]
            print(tables.to_markdown(undecided[cols]))
        if code == 2:
            return _fail(f"baseline {baseline_name}: {result.problem()}")
        regs = result.regressions()
        if len(regs):
            print(f"REGRESSIONS ({len(regs)}):")
            cols = (["run_id"] if len(runs) > 1 else []) + ["key", "metric", "baseline", "current", "ratio",
                                                            "note"]
            print(tables.to_markdown(regs[cols]))
        elif code:
            print("no regression; undecided point(s) fail the gate (--strict)")
        else:
            print("no regression")
    if args.html:
        print(f"html: {out / 'report.html'}")
    return code
