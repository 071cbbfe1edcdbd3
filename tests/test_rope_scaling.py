"""Scaled RoPE (``rope_frequencies``, ``suites/rope_scaling/``): the planted family's correct base, the
float64 reference and Hugging Face transformers' own initializers pass every property; the planted
bugs (``tests/planted/rope_scaling/``) are run by ``tests/test_planted_bugs.py``."""
from __future__ import annotations

import pytest

from planted_support import ROOT, conformance, nodes, run_suite, suite_file, suite_tests

SUITES = [suite_file("test_rope_scaling.py")]
BASE = ROOT / "tests" / "planted" / "rope_scaling" / "_base.py"
TARGETS = [str(BASE), "reference", "harness.adapters.hf_rope_scaling"]


def test_correct_scaled_ropes_pass_every_property(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SUITES, TARGETS, None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    props = {p for p, _ in cells if p.startswith("rope_scaling.")}
    assert len(props) == len(suite_tests("test_rope_scaling.py")), props
    for (prop, target), cell in cells.items():
        if prop.startswith("rope_scaling."):
            assert cell == "pass", (prop, target, cell)


@pytest.mark.optional_libs("torchtune", "x_transformers")
def test_torchtune_and_xtransformers_scaled_ropes_pass(pytester, tmp_path):
    """torchtune's ``Llama3ScaledRoPE`` (``harness.adapters.torchtune_rope_scaling``) and x-transformers'
    interpolated ``RotaryEmbedding`` (``xtransformers_rope_scaling``): the rule each has passes, the rules
    it does not have are unsupported, never failed."""
    report = tmp_path / "report"
    tt, xt = "harness.adapters.torchtune_rope_scaling", "harness.adapters.xtransformers_rope_scaling"
    tests = nodes(test_rope_scaling="test_plain test_linear test_llama3_bands test_yarn")
    result = run_suite(pytester, tests, [tt, xt], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    for prop, target in (("llama3_bands", tt), ("plain", tt), ("linear", xt), ("plain", xt)):
        # (a partial rotary factor, which neither module takes, is passed over: "pass; n of m ... unsupported")
        assert cells[(f"rope_scaling.{prop}", target)].startswith("pass"), cells
    assert cells[("rope_scaling.yarn", tt)].startswith("unsupported"), cells
    assert cells[("rope_scaling.llama3_bands", xt)].startswith("unsupported"), cells
