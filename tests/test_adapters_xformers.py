"""xformers' block-diagonal attention biases (``harness.adapters.xformers_varlen``), materialized, held to
``attention_varlen``'s contract: a one-seed slice (the ci profile); the sweep runs the rest (a control).
Its limit (causal with more queries than keys in a sequence) is unsupported, never failed."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

ADAPTER = "harness.adapters.xformers_varlen"
pytestmark = pytest.mark.optional_libs("xformers")


def test_xformers_biases_pass_with_their_limit_unsupported(pytester, tmp_path):
    report = tmp_path / "report"
    tests = nodes(test_varlen="test_agreement test_isolation test_causal test_window test_sinks",
                  test_options_together="test_varlen")
    result = run_suite(pytester, tests, [ADAPTER], None,
                       "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == ADAPTER}
    assert cells["varlen.agreement"] == "pass" and cells["varlen.isolation"] == "pass"
    assert cells["varlen.causal"].startswith("pass") and "unsupported (NotImplementedError" in cells["varlen.causal"]
    assert cells["varlen.window"].startswith("convention:w")
    assert cells["varlen.sinks"].startswith("unsupported (declared:")
