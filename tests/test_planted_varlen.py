"""The packed-sequence suites catch real bugs: each planted-bug target in ``tests/planted/varlen/``
fails exactly the property meant to catch it, with the property's name and a repro line.

Each case runs ONE suite test in-process (``-k``) under the derandomized ``ci`` profile. Controls:
``reference`` and the planted base (a correct kernel on torch ops) pass every property, and a
target that declares softcap and sinks unsupported is reported so there, not failed.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

from pathlib import Path


from planted_support import conformance, property_of, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "varlen"
SUITES = ("test_varlen.py", "test_varlen_grad.py")


#: a correct kernel without the two options (torch's nested-jagged SDPA has neither)
NO_OPTIONS = '''
import sys
sys.path.insert(0, {where!r})
from _base import Varlen
HARNESS_UNSUPPORTED = {{"softcap", "sinks"}}
attention_varlen = Varlen().attention_varlen
'''


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference and the torch base pass every varlen property (the window named w)."""
    report = tmp_path / "report"
    impls = ["reference", PLANTED / "_base.py"]
    result = run_suite(pytester, SUITES, impls, None, "--conformance-report", str(report))
    n = sum(len(suite_tests(s)) for s in SUITES)
    result.assert_outcomes(passed=2 * n)
    cells = conformance(report)
    for target in ("reference", str(PLANTED / "_base.py")):
        for suite in SUITES:
            for test in suite_tests(suite):
                cell = cells[(property_of(suite, test), target)]
                assert cell in ("pass", "convention:w"), (test, target, cell)


def test_declared_options_are_unsupported_not_failed(pytester, tmp_path):
    report = tmp_path / "report"
    target = tmp_path / "no_options.py"
    target.write_text(NO_OPTIONS.format(where=str(PLANTED)))
    result = run_suite(pytester, ["test_varlen.py"], [target], "test_softcap or test_sinks or test_gqa",
                       "--conformance-report", str(report))
    result.assert_outcomes(passed=1, skipped=2)
    cells = conformance(report)
    for prop in ("varlen.softcap", "varlen.sinks"):
        assert cells[(prop, str(target))].startswith("unsupported (declared:"), cells


def test_torch_nested_control_passes_what_it_takes(pytester, tmp_path):
    """harness.adapters.torch_nested_attention (torch's nested jagged SDPA): every property it can
    be checked on passes, the ones it declares (causal, window, softcap, sinks) are reported
    unsupported, and the RoPE property skips (it has no apply_rotary_embedding)."""
    report = tmp_path / "report"
    target = "harness.adapters.torch_nested_attention"
    result = run_suite(pytester, SUITES, [target], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-3000:]
    cells = conformance(report)
    for prop in ("varlen.causal", "varlen.window", "varlen.softcap", "varlen.sinks"):
        assert cells[(prop, target)].startswith("unsupported"), (prop, cells[(prop, target)])
    for prop in ("varlen.isolation", "varlen.zero_length", "varlen.gqa", "varlen_grad.isolation"):
        assert cells[(prop, target)].startswith("pass"), (prop, cells[(prop, target)])
