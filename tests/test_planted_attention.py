"""The attention suites catch real bugs: each planted-bug target fails exactly the
property meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/attention/`` has one bug (its docstring says which,
and which public bug it mimics) on top of the correct ``_base.py``. Each case runs
ONE suite test in-process (``-k``) under the derandomized ``ci`` profile, so the
outcome is the same on every run. Controls: ``reference``, ``torch.nn.functional``
and the planted base itself pass everything; the declared-convention variants pass.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planted_support import assert_declared_passes, conformance, run_suite, suite_file

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "attention"
ATTENTION_SUITES = ["test_attention.py", "test_attention_masks.py", "test_attention_dropout.py",
                    "test_sliding_window.py"]


#: (target declaring a convention, suite file, tests that must pass, label recorded)
DECLARED = [
    ("causal_bottom_right_declared.py", "test_attention_masks.py", ["test_causal"],
     {"attention.causal": "convention:bottom_right"}),
    ("window_w_plus_one_declared.py", "test_sliding_window.py",
     ["test_window_extent", "test_window_agreement", "test_outside_window"],
     {"sliding_window.window_extent": "convention:w+1"}),
    ("dropout_generator_declared.py", "test_attention_dropout.py",
     ["test_dropout_seeded", "test_dropout_keep_rate", "test_dropout_fresh_masks"],
     {"attention.dropout_seeded": "convention:generator"}),
]


def _suite_source(name: str) -> str:
    return suite_file(name).read_text()


def suite_of(test: str) -> Path:
    """The attention suite file that defines ``test``."""
    hits = [suite_file(f) for f in ATTENTION_SUITES if re.search(rf"^def {test}\(", _suite_source(f), re.M)]
    assert len(hits) == 1, f"{test} is defined in {hits}, expected exactly one attention suite"
    return hits[0]


def property_of(test: str) -> str:
    family = re.search(r'^PROPERTY_PREFIX = "([^"]+)"', suite_of(test).read_text(), re.M).group(1)
    return f"{family}.{test.removeprefix('test_')}"


# (``target`` is the harness plug-in's parameter name, hence ``planted``)
@pytest.mark.parametrize("planted,suite,tests,labels", DECLARED, ids=[d[0].removesuffix(".py") for d in DECLARED])
def test_declared_convention_passes(pytester, tmp_path, planted, suite, tests, labels):
    assert_declared_passes(pytester, tmp_path / "report", suite, PLANTED / planted, tests, labels)


def test_convention_on_the_command_line_passes(pytester):
    """The undeclared w+1 window passes once ``--convention window_extent=w+1`` is given."""
    result = run_suite(pytester, [suite_file("test_sliding_window.py")], [PLANTED / "window_w_plus_one.py"],
                       "test_window_extent", "--convention", "window_extent=w+1")
    result.assert_outcomes(passed=1)


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference, torch.nn.functional and the planted base pass every attention and
    sliding-window property; torch lacks sliding_window_attention and skips it by name."""
    report = tmp_path / "report"
    impls = ["reference", "torch.nn.functional", PLANTED / "_base.py"]
    result = run_suite(pytester, [suite_file(f) for f in ATTENTION_SUITES], impls, None,
                       "--conformance-report", str(report), "-rs")
    n = {f: len(re.findall(r"^def test_\w+\(", _suite_source(f), re.M)) for f in ATTENTION_SUITES}
    n_swa = n["test_sliding_window.py"]
    n_all = sum(n.values())
    result.assert_outcomes(passed=3 * n_all - n_swa, skipped=n_swa)
    assert "has no attribute 'sliding_window_attention'" in result.stdout.str()
    cells = conformance(report)
    for (prop, target), cell in cells.items():
        if target == "torch.nn.functional" and prop.startswith("sliding_window."):
            assert cell.startswith("skipped"), (prop, target, cell)
        else:
            assert cell == "pass" or cell.startswith("convention:"), (prop, target, cell)
    # the defaults: top-left causal, the protocol's w window; torch and reference agree on zeros
    for target in ("reference", "torch.nn.functional", str(PLANTED / "_base.py")):
        assert cells[("attention.causal", target)] == "convention:top_left"
        assert cells[("attention.fully_masked_rows", target)] == "convention:zeros"
    assert cells[("sliding_window.window_extent", "reference")] == "convention:w"


def test_failure_detail_in_the_report(pytester, tmp_path):
    """The conformance report's failure detail says what went wrong, not just 'fail'."""
    report = tmp_path / "report"
    run_suite(pytester, [suite_file("test_attention_masks.py")], [PLANTED / "finite_mask_constant.py"],
              "test_bool_mask", "--conformance-report", str(report))
    rows = json.loads((report / "conformance.json").read_text())["results"]
    (row,) = [r for r in rows if r["property"] == "attention.bool_mask"]
    assert row["result"] == "fail"
    assert row["detail"].startswith("property violated: masked keys"), row["detail"]
