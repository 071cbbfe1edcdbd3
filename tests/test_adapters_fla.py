"""flash-linear-attention's Triton norms (``harness.adapters.fla_norms``) under Triton's interpreter on a
CPU: autotuned kernels, which stop without a GPU driver unless the harness's ``autotune`` interpreter
fix keeps their first config. A one-seed slice (the ci profile); all their properties at random seeds,
and fla's rotary (``fla_positions``), are the sweep's (both are controls)."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

pytestmark = pytest.mark.optional_libs("fla")


def test_fla_norms_pass_under_the_interpreter(pytester, tmp_path):
    report = tmp_path / "report"
    # one target (each imports fla in its own worker, ~10 s): the norms, autotuned; fla's rotary
    # (harness.adapters.fla_positions) is the sweep's, where it passes every RoPE property
    tests = nodes(test_layernorm="test_standardized", test_rmsnorm="test_eps")
    result = run_suite(pytester, tests, ["harness.adapters.fla_norms"], None, "--conformance-report", str(report))
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) == 0, out[-4000:]
    assert "autotune" in out  # the header names the interpreter fixes in place
    cells = conformance(report)
    assert cells[("layernorm.standardized", "harness.adapters.fla_norms")] == "pass"
    assert cells[("rmsnorm.eps", "harness.adapters.fla_norms")] == "convention:fixed"


def test_fla_softmax_attention_passes_under_the_interpreter(pytester, tmp_path):
    """fla's ``parallel_attn`` (``harness.adapters.fla_attention``): packed causal sequences with a window and
    sinks, forward and backward; non-causal calls are unsupported (it is causal only), never failed."""
    report = tmp_path / "report"
    tests = nodes(test_varlen="test_isolation test_window test_sinks", test_varlen_grad="test_isolation")
    result = run_suite(pytester, tests, ["harness.adapters.fla_attention"], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == "harness.adapters.fla_attention"}
    assert cells["varlen.window"].startswith("convention:w"), cells
    for prop in ("varlen.isolation", "varlen.sinks", "varlen_grad.isolation"):
        assert cells[prop].startswith("pass"), (prop, cells[prop])
