"""The latent-attention suite catches real bugs and passes correct kernels: ``reference`` and the planted
base (a float32 loop over heads) pass every ``mla`` property, and a kernel without a paged cache or
several latent heads (declared, its function without ``block_table``) gets those properties reported
unsupported, not failed.

The planted bugs themselves (each file in ``tests/planted/mla/`` names the property that catches it) run
in ``tests/test_planted_bugs.py``.
"""
from __future__ import annotations

from pathlib import Path

from planted_support import conformance, property_of, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "mla"
SUITE = "test_mla.py"


def test_correct_targets_pass_everything(pytester, tmp_path):
    report = tmp_path / "report"
    impls = ["reference", PLANTED / "_base.py"]
    result = run_suite(pytester, [SUITE], impls, None, "--conformance-report", str(report))
    result.assert_outcomes(passed=2 * len(suite_tests(SUITE)))
    cells = conformance(report)
    for target in ("reference", str(PLANTED / "_base.py")):
        for test in suite_tests(SUITE):
            assert cells[(property_of(SUITE, test), target)] == "pass", (test, target)


def test_paging_and_latent_heads_unsupported_are_not_failures(pytester, tmp_path):
    report = tmp_path / "report"
    target = PLANTED / "no_paging_declared.py"
    result = run_suite(pytester, [SUITE], [target], "test_paged or test_kv_heads or test_agreement",
                       "--conformance-report", str(report))
    result.assert_outcomes(passed=1, skipped=2)
    cells = conformance(report)
    for test in ("test_paged", "test_kv_heads"):
        assert cells[(property_of(SUITE, test), str(target))].startswith("unsupported (declared:"), cells
    assert cells[("mla.agreement", str(target))] == "pass"
