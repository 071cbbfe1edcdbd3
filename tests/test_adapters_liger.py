"""liger-kernel 0.8.5's Triton LayerNorm and RMSNorm (``harness.adapters.liger_norms``) under Triton's
interpreter on a CPU: they did not run before issue 42 (a Python float eps, libdevice's rsqrt stub);
with the harness's interpreter fixes they pass, conventions named. A one-seed slice (the ci profile);
every norm property at random seeds is the sweep's (the adapter is a control)."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

ADAPTER = "harness.adapters.liger_norms"
pytestmark = pytest.mark.optional_libs("liger_kernel")


def test_liger_norms_pass_under_the_interpreter(pytester, tmp_path):
    report = tmp_path / "report"
    tests = nodes(test_layernorm="test_standardized", test_rmsnorm="test_eps", test_norm_grad="test_rmsnorm test_layernorm")
    result = run_suite(pytester, tests, [ADAPTER], None, "--conformance-report", str(report))
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) == 0, out[-4000:]
    assert "interpreted (TRITON_INTERPRET=1)" in out
    cells = {p: c for (p, t), c in conformance(report).items() if t == ADAPTER}
    assert cells["rmsnorm.eps"] == "convention:fixed"
    for prop in ("layernorm.standardized", "norm_grad.rmsnorm", "norm_grad.layernorm"):
        assert cells[prop] == "pass", (prop, cells[prop])
