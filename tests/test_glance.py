"""Reports a person reads at a glance (issue 14): narrow summary tables, skipped rows folded into
counts, plots titled in words, the conformance summary line and ``--hide-skipped``, no
"unversioned", progress off when stderr is not a terminal."""
from __future__ import annotations

from types import SimpleNamespace

from reports import conformance


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
    targets = [SimpleNamespace(spec="mine.py", file="/x/mine.py", version="unversioned"),
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
    shown = run_suite(pytester, ["test_attention.py"], [target], None, "--show-skipped").stdout.str()
    table = shown.split("conformance (property x target)")[1]
    assert "attention.scale" in table and "are hidden" not in table
