"""Scaled RoPE (``rope_frequencies``, ``suites/rope_scaling/``): the planted family's correct base, the
float64 reference and Hugging Face transformers' own initializers pass every property; the planted
bugs (``tests/planted/rope_scaling/``) are run by ``tests/test_planted_bugs.py``."""
from __future__ import annotations

import pytest

from planted_support import ROOT, conformance, run_suite, suite_file

SUITES = [suite_file("test_rope_scaling.py")]
BASE = ROOT / "tests" / "planted" / "rope_scaling" / "_base.py"
TARGETS = [str(BASE), "reference", "harness.adapters.hf_rope_scaling"]


def test_correct_scaled_ropes_pass_every_property(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SUITES, TARGETS, None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    props = {p for p, _ in cells if p.startswith("rope_scaling.")}
    assert len(props) == 9, props
    for (prop, target), cell in cells.items():
        if prop.startswith("rope_scaling."):
            assert cell == "pass", (prop, target, cell)


@pytest.mark.optional_libs("torchtune")
def test_torchtune_llama3_scaled_rope_passes(pytester, tmp_path):
    """torchtune's ``Llama3ScaledRoPE`` (``harness.adapters.torchtune_rope_scaling``): the llama3 rule passes,
    the rules torchtune does not have are unsupported, never failed."""
    report = tmp_path / "report"
    result = run_suite(pytester, SUITES, ["harness.adapters.torchtune_rope_scaling"], None,
                       "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, _), c in conformance(report).items()}
    assert cells["rope_scaling.llama3_bands"] == "pass" and cells["rope_scaling.plain"] == "pass", cells
    assert cells["rope_scaling.yarn"].startswith("unsupported"), cells
