"""flash-linear-attention's Triton norms and rotary (``harness.adapters.fla_norms``, ``fla_positions``)
under Triton's interpreter on a CPU: autotuned kernels, which stop without a GPU driver unless the
harness's ``autotune`` interpreter fix keeps their first config. A one-seed slice (the ci profile);
all their properties at random seeds are the sweep's (both are controls)."""
from __future__ import annotations

import pytest

from planted_support import conformance, run_suite

pytestmark = pytest.mark.optional_libs("fla")


def test_fla_norms_and_rotary_pass_under_the_interpreter(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_layernorm.py", "test_rmsnorm.py", "test_rope.py", "test_rope_module.py"],
                       ["harness.adapters.fla_norms", "harness.adapters.fla_positions"],
                       "test_standardized or test_eps or test_agreement or test_call_sequences",
                       "--conformance-report", str(report))
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) == 0, out[-4000:]
    assert "autotune" in out  # the header names the interpreter fixes in place
    cells = conformance(report)
    assert cells[("layernorm.standardized", "harness.adapters.fla_norms")] == "pass"
    assert cells[("rmsnorm.eps", "harness.adapters.fla_norms")] == "convention:fixed"
    assert cells[("rope.agreement", "harness.adapters.fla_positions")] == "convention:rotate_half"
    assert cells[("rope_module.call_sequences", "harness.adapters.fla_positions")] == "convention:rotate_half"
