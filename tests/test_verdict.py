"""One verdict record (issue 45, item 1): a cell's kind is decided in ``harness.verdicts.verdict.decide`` from
the data the plug-in recorded (the outcome, the phase, the label, the skip's kind as its exception
type), and read nowhere else from text; ``legacy_kind`` reads the fixed spellings of files written
before kinds were recorded, and is the only reader of them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.verdicts import verdict

ROOT = Path(__file__).resolve().parents[1]

ROWS = [
    ({"outcome": "passed", "when": "call"}, "pass", "pass"),
    ({"outcome": "passed", "when": "call", "label": "convention:w"}, "convention", "convention:w"),
    ({"outcome": "passed", "when": "call", "unsupported": "3 of 9 configs unsupported (declared)"}, "partial",
     "pass; 3 of 9 configs unsupported (declared)"),
    ({"outcome": "failed", "when": "call"}, "fail", "fail"),
    ({"outcome": "failed", "when": "setup"}, "error", "error"),
    ({"outcome": "failed", "when": "call", "expected": "x.txt:3"}, "known", "known fail (x.txt:3)"),
    ({"outcome": "skipped", "when": "setup", "skip_kind": "unsupported", "reason": "unsupported (declared: f)"},
     "unsupported", "unsupported (declared: f)"),
    ({"outcome": "skipped", "when": "setup", "skip_kind": "not_loaded", "reason": "target 'x' does not load"},
     "error", "error"),
    ({"outcome": "skipped", "when": "setup", "reason": "target 'x' has no attribute 'f'"}, "skipped",
     "skipped (target 'x' has no attribute 'f')"),
]


@pytest.mark.parametrize("row,kind,text", ROWS, ids=[k for _, k, _ in ROWS])
def test_decide_reads_the_recorded_data(row, kind, text):
    _, got_text, got_kind = verdict.decide(row)
    assert (got_kind, got_text) == (kind, text)


def test_a_skip_whose_text_looks_unsupported_is_a_skip_when_its_kind_says_so():
    """The kind is the data's: a plain skip whose reason happens to start with 'unsupported (' is a skip."""
    row = {"outcome": "skipped", "when": "setup", "skip_kind": "skipped", "reason": "unsupported (a user's own skip)"}
    assert verdict.decide(row)[2] == "skipped"


def test_legacy_rows_and_cells_still_read():
    assert verdict.decide({"outcome": "skipped", "when": "setup", "reason": "unsupported (declared: f)"})[2] == \
        "unsupported"
    assert [verdict.legacy_kind(t) for t in ("fail", "convention:w", "pass; 1 of 2 configs unsupported", "skipped (x)")] \
        == ["fail", "convention", "partial", "skipped"]


def test_no_other_module_reads_a_kind_out_of_result_text():
    """``git grep``'s check: the fixed spellings of cells are read in harness/verdicts/verdict.py only."""
    # (a label "convention:<value>" is harness.spec.conventions' own format, read back by its measured_of)
    pattern = re.compile(r"""startswith\(\s*(f?["'](unsupported \(|skipped)|f"\{runner\.UNSUPPORTED)""")
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "harness").rglob("*.py")
                 if p.name != "verdict.py" and pattern.search(p.read_text())]
    assert offenders == [], offenders


def test_the_report_carries_one_row_with_its_verdict(pytester):
    """The plug-in decides the verdict once, when the report is made, and the report carries it as one
    value (``harness_row``, JSON); the results sink only collects it, the table only reads it."""
    import json
    from planted_support import run_suite
    from harness.verdicts.session_rows import ROW_KEY
    seen = []

    class Spy:
        def pytest_runtest_logreport(self, report):
            props = [(k, v) for k, v in report.user_properties if k.startswith("harness_")]
            if props:
                seen.append((report.when, props))

    result = run_suite(pytester, ["test_alibi.py"], ["reference"], "test_slopes", plugins=[Spy()])
    result.assert_outcomes(passed=1)
    assert seen and all(len(props) == 1 and props[0][0] == ROW_KEY for _, props in seen), seen
    row = json.loads(next(props for when, props in seen if when == "call")[0][1])
    assert (row["kind"], row["text"], row["property"]) == ("pass", "pass", "alibi.slopes"), row
    assert row["seconds"] is not None and row["target_seconds"] is not None
