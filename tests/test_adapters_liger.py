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


LIGER_IN_PLACE = '''
import torch
from torch import nn
from liger_kernel.ops.rms_norm import LigerRMSNormFunction
from harness.adapters.last_dim_norm import rms_norm_class

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed", "rmsnorm_scale": "weight"}
HARNESS_UNSUPPORTED = {"float64", "autocast"}


class _InPlace(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):  # in_place=True on the dY it is handed (a residual branch's, Gemma 2's sandwich norms)
        return LigerRMSNormFunction.apply(x, self.weight.to(x.dtype), self.eps, 0.0, "llama", True)


RMSNorm = rms_norm_class(_InPlace, 1e-6, "liger's RMSNorm, in place on its incoming gradient")
'''


def test_liger_in_place_on_a_shared_gradient_is_caught(pytester, tmp_path):
    """liger's ``LigerRMSNormFunction(..., in_place=True)`` (``LigerRMSNorm``'s default) on the dY it is
    handed writes dX into it: every dx is right, and ``norm_grad.rmsnorm`` fails because the incoming
    gradient came back changed (the adapter, called as Llama's decoder calls it, gets a fresh dY)."""
    target = tmp_path / "liger_in_place.py"
    target.write_text(LIGER_IN_PLACE)
    result = run_suite(pytester, nodes(test_norm_grad="test_rmsnorm"), [target])
    result.assert_outcomes(failed=1)
    assert "wrote into its incoming gradient (grad_output)" in result.stdout.str()
