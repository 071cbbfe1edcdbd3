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
                     "label": None, "reason": "target lacks 'sliding_window_attention' (protocol name)"})
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
