"""Reports a person reads at a glance (issue 14): narrow summary tables, skipped rows folded into
counts, plots titled in words, the conformance summary line and ``--hide-skipped``, no
"unversioned", progress off when stderr is not a terminal."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from harness.verdicts import conformance_table as conformance


def _rows():
    rows = []
    for i in range(6):
        rows.append({"property": f"attention.p{i}", "target": "t1", "when": "setup", "outcome": "skipped",
                     "label": None, "reason": "target 'mine.py' has no attribute 'sliding_window_attention'"})
    rows += [{"property": "attention.p6", "target": "t1", "when": "call", "outcome": "passed",
              "label": None, "reason": ""},
             {"property": "attention.p7", "target": "t1", "when": "call", "outcome": "passed",
              "label": "convention:bottom_right", "reason": ""},
             {"property": "attention.p8", "target": "t1", "when": "call", "outcome": "failed",
              "label": None, "reason": "mismatch: max error 3"},
             {"property": "attention.p9", "target": "t1", "when": "setup", "outcome": "skipped",
              "label": None, "reason": "unsupported (declared: float64)"}]
    return rows


def test_conformance_md_says_nothing_about_a_missing_version(tmp_path):
    targets = [SimpleNamespace(spec="mine.py", file="/x/mine.py", version=None),
               SimpleNamespace(spec="pkg", file="/x/pkg.py", version="1.2")]
    conformance.write_conformance(_rows(), tmp_path, targets=targets)
    md = (tmp_path / "conformance.md").read_text()
    assert "unversioned" not in md and "version" not in md.split("`pkg`")[0]
    assert "- `mine.py`: /x/mine.py\n" in md and "(version 1.2)" in md


def test_summary_line_counts_each_kind_per_target():
    assert conformance.summary_lines(_rows()) == [
        "t1: pass 1, convention 1, fail 1, unsupported 1, skipped 6"]


def test_terminal_table_hides_all_skipped_rows_when_most_are_and_abbreviates():
    rows = _rows()
    table, hidden = conformance.terminal_table(rows)  # default: 6 of 10 rows all skipped -> hidden
    assert hidden == 6 and len(table) == 4 and "attention.p0" not in table.index
    table, hidden = conformance.terminal_table(rows, hide_skipped=False)
    assert hidden == 0 and len(table) == 10
    assert table.loc["attention.p0", "t1"] == "skipped: no sliding_window_attention"
    assert all(len(str(c)) <= 40 for c in table["t1"])
    few = [r for r in rows if r["property"] not in {f"attention.p{i}" for i in range(1, 6)}]
    assert conformance.terminal_table(few)[1] == 0  # a minority of skipped rows is shown
    assert conformance.terminal_table(few, hide_skipped=True)[1] == 1


def test_written_conformance_keeps_every_row_and_the_summary_line(tmp_path):
    conformance.write_conformance(_rows(), tmp_path)
    md = (tmp_path / "conformance.md").read_text()
    assert "- t1: pass 1, convention 1, fail 1, unsupported 1, skipped 6" in md
    assert all(f"attention.p{i}" in md for i in range(10))
    assert "target 'mine.py' has no attribute 'sliding_window_attention'" in \
        (tmp_path / "conformance.csv").read_text()


NOTHING = "VALUE = 1  # a target that defines no protocol name: every attention test is skipped\n"


def test_plugin_hides_all_skipped_rows_by_default_and_prints_the_summary(pytester, tmp_path):
    from tests.planted_support import run_suite
    target = tmp_path / "nothing.py"
    target.write_text(NOTHING)
    out = run_suite(pytester, ["test_attention.py"], [target]).stdout.str()
    assert "row(s) where every target was skipped are hidden" in out
    assert "attention.scale" not in out.split("conformance (property x target)")[1]
    assert f"{target}: pass 0, convention 0, fail 0, unsupported 0, skipped " in out
    header = next(line for line in out.splitlines() if line.startswith(f"target {target}:"))
    assert "version" not in header, header  # the module has no __version__: the header says nothing of one
    shown = run_suite(pytester, ["test_attention.py"], [target], None, "--show-skipped").stdout.str()
    table = shown.split("conformance (property x target)")[1]
    assert "attention.scale" in table and "are hidden" not in table


class _Stream:
    def __init__(self, tty):
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_bar_only_on_a_terminal_unless_asked():
    from harness.bench.points import progress_wanted
    assert progress_wanted(None, _Stream(True)) and not progress_wanted(None, _Stream(False))
    assert not progress_wanted(False, _Stream(True)) and progress_wanted(True, _Stream(False))


def test_without_a_bar_each_finished_point_is_one_plain_line(tmp_path, capsys):
    from harness.bench.points import Point, PointRunner, Skip
    from harness.bench.store import ResultStore

    def skip():
        raise Skip("needs CUDA")
    runner = PointRunner(ResultStore(tmp_path), "x", "cpu")  # progress=None: capsys' stderr is no terminal
    assert runner.progress is False
    runner.run([Point("scaling", "a", {"n": 1}, lambda: {"time_s": 1.0}),
                Point("scaling", "a", {"n": 2}, skip)], desc="scaling")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[scaling] 1/2 a n=1: ok (") and err[1] == "[scaling] 2/2 a n=2: skipped: needs CUDA"
    assert "\r" not in "".join(err) and max(map(len, err)) < 200


def test_run_passes_no_progress_to_its_bench_stages(monkeypatch, tmp_path):
    import harness.commands.run as run_command
    from harness.cli import main as cli
    calls = []

    def fake(argv):
        calls.append(argv)
        if argv[0] == "check":
            (Path(argv[argv.index("--report") + 1])).mkdir(parents=True, exist_ok=True)
            (Path(argv[argv.index("--report") + 1]) / "conformance.json").write_text("{}")
        return 0
    monkeypatch.setattr(run_command, "stage", fake)
    assert cli(["run", "--out", str(tmp_path / "job"), "--no-progress"]) == 0
    assert [("--no-progress" in a) for a in calls] == [False, True, True, False]


def _skipping_run(tmp_path):
    from tests.run_folders import NS, make_run
    status = {("banded_window", n): ("skipped", "SDPA backend x is CUDA-only (device cpu)") for n in NS}
    status[("target.sdpa", 4096)] = ("skipped", "time budget: 10 s of the run spent")
    return make_run(tmp_path, "a", status=status)


def test_summary_md_is_narrow_tables_with_skips_folded_to_counts(tmp_path):
    from harness.reports import tables
    from harness.reports.load import load_runs, tidy
    df = tidy(load_runs([_skipping_run(tmp_path)]))
    tables.write_tables(df, tmp_path / "out", ["csv", "md"])
    md = (tmp_path / "out" / "summary.md").read_text()
    widths = [line.count("|") - 1 for line in md.splitlines() if line.startswith("|")]
    assert widths and max(widths) <= 14, max(widths)
    assert "telemetry" not in md and "time_min_s" not in md and "every row: impl reference" in md
    scaling = md.split("## scaling")[1].split("## ")[0]
    assert "skipped (reason -> points)" in scaling
    assert scaling.count("CUDA-only") == 1 and "|        5 | banded_window" in scaling
    assert scaling.count("time budget") == 1
    assert "oom" in scaling and "needs 4 GiB" in scaling  # a failed point keeps its row and reason
    assert "reference (sdpa)" in scaling and "target.sdpa" not in scaling  # the target under its own name
    full = pd.read_csv(tmp_path / "out" / "summary_scaling.csv")  # the CSV keeps every row and column
    assert (full["status"] == "skipped").sum() == 6 and "time_min_s" in full.columns


def test_html_folds_skipped_points_to_one_count_per_reason(tmp_path):
    from harness.cli import main as cli
    out = tmp_path / "out"
    assert cli(["report", str(_skipping_run(tmp_path)), "--out", str(out), "--html", "--formats", "csv",
                "--no-plots"]) == 0
    text = (out / "report.html").read_text()
    scaling = text.split("id='suite-scaling'")[1].split("<h2")[0]
    assert "skipped: 6 point(s), by reason" in scaling
    assert scaling.count("CUDA-only") == 1 and scaling.count("time budget") == 1
    assert "every row: impl reference" in scaling and "time_min_s" not in scaling


def test_plots_are_titled_in_words_with_the_target_by_name_and_legends_outside(tmp_path, monkeypatch):
    from harness.reports import plots
    from harness.reports.load import load_runs, tidy
    from tests.run_folders import make_run
    figures = {}
    save = plots._save

    def keep(fig, out, name):
        fig.canvas.draw()
        figures[name] = [(ax.get_title(), [t.get_text() for t in ax.get_legend().get_texts()]
                          if ax.get_legend() else [], ax.get_legend().get_window_extent().x0
                          if ax.get_legend() else None, ax.get_window_extent().x1) for ax in fig.axes]
        return save(fig, out, name)
    monkeypatch.setattr(plots, "_save", keep)
    runs = load_runs([make_run(tmp_path, "a", impl="/x/my_attn.py")])
    plots.make_plots(tidy(runs), runs, tmp_path / "plots")
    scaling = figures["scaling_scaling"]
    assert [t for t, *_ in scaling] == ["attention time vs sequence length",
                                        "attention peak memory vs sequence length"]
    labels = [label for _, legend, *_ in scaling for label in legend]
    assert any(label.startswith("my_attn.py (sdpa)") for label in labels), labels
    assert not any("target.sdpa" in label or "=" in label.split(" (k")[0] or "<NA>" in label
                   for label in labels), labels
    for _, legend, x0, x1 in scaling + figures["kv_cache_bars"]:
        assert legend and x0 >= x1, "the legend overlaps the data area"
    heat = [name for name in figures if name.startswith("receptive_field_heatmap")]
    assert heat and "banded_window" in figures[heat[0]][0][0]


def test_legend_words_for_values():
    from harness.reports.plots import _label
    row = pd.Series({"case": "lstm", "role": "comparison", "impl": "x", "causal": pd.NA, "window": 8})
    assert _label(row, ["case", "causal", "window"]) == "lstm, window 8"
    row = pd.Series({"case": "target.sdpa", "role": "target", "impl": "pkg/mine.py", "causal": True})
    assert _label(row, ["case", "causal"]) == "mine.py (sdpa), causal"


def test_comparison_rows_name_the_target_from_their_key(tmp_path):
    """A baseline comparison has no impl column: its target rows are named from the point key, in
    the Markdown (comparison.md, regressions.md) as in the HTML; the CSV keeps the case id."""
    from harness.reports import glance, tables
    table = pd.DataFrame({"key": ['scaling|target.sdpa@my_attn.py|{"n":64}', 'scaling|reference.naive|{"n":64}',
                                  "scaling|*|time_s:suite_median"],
                          "case": ["target.sdpa", "reference.naive", "*"], "role": ["target", "comparison", ""],
                          "metric": ["time_s"] * 3, "verdict": ["regression", "ok", "ok"]})
    assert glance.named_cases(table)["case"].tolist() == ["my_attn.py (sdpa)", "reference.naive", "*"]
    tables.write_frame(table, tmp_path, "comparison", ["csv", "md"])
    assert "my_attn.py (sdpa)" in (tmp_path / "comparison.md").read_text()
    assert pd.read_csv(tmp_path / "comparison.csv")["case"].tolist()[0] == "target.sdpa"


def test_a_target_without_its_own_version_shows_its_distributions_or_its_checkouts(tmp_path):
    """The header and conformance.md print a real version where one is known: the module's own, its
    distribution's (package metadata), or ``git describe`` of the checkout holding its file; else
    nothing (never "unversioned")."""
    import shutil
    import subprocess

    from harness.basics import versions
    assert versions.label(SimpleNamespace(spec="pkg", file="/x/pkg.py", version="1.2")) == " (version 1.2)"
    reference = SimpleNamespace(spec="reference", file=str(Path(__file__).parents[1] / "reference" / "__init__.py"),
                                version=None)
    assert versions.label(reference).startswith((" (version ", " (git ")), versions.label(reference)
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "mine.py").write_text("X = 1\n")
    assert versions.label(SimpleNamespace(spec=str(loose / "mine.py"), file=str(loose / "mine.py"),
                                          version=None)) == ""
    if shutil.which("git") is None:
        return
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kernel.py").write_text("X = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "kernel.py"], ["commit", "-qm", "one"], ["tag", "v0.3"]):
        subprocess.run(git + args, check=True, capture_output=True)
    target = SimpleNamespace(spec=str(repo / "kernel.py"), file=str(repo / "kernel.py"), version=None)
    assert versions.label(target) == " (git v0.3)"
    conformance.write_conformance(_rows(), tmp_path / "out", targets=[target])
    assert f"- `{target.spec}`: {target.file} (git v0.3)\n" in (tmp_path / "out" / "conformance.md").read_text()
