"""The normalization suites catch real bugs: each planted-bug target fails exactly the
property meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/norms/`` has one bug (its docstring says which, and which
public bug it mimics) on top of the correct ``_base.py``; the ``*_declared.py`` and
``block_post_norm.py`` files are controls that follow a declared or reported convention.
Each case runs ONE suite test in-process (``-k``) under the derandomized ``ci`` profile.
Controls: ``reference``, ``torch.nn``, the planted base and the Hugging Face adapters pass
every norm property, with their conventions named in the conformance table.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from planted_support import assert_declared_passes, conformance, property_of, run_suite, suite_file, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "norms"
NORM_SUITES = ["test_layernorm.py", "test_rmsnorm.py", "test_norm_placement.py"]


#: (control target, suite file, tests that must pass, labels recorded)
DECLARED = [
    ("rms_fixed_eps_declared.py", "test_rmsnorm.py", ["test_eps"], {"rmsnorm.eps": "convention:fixed"}),
    ("rms_one_plus_weight_declared.py", "test_rmsnorm.py", None,
     {"rmsnorm.weight": "convention:one_plus_weight", "rmsnorm.eps": "convention:finfo"}),
    ("block_post_norm.py", "test_norm_placement.py", ["test_placement"],
     {"norm_placement.placement": "convention:post"}),
]

HF_ADAPTERS = {  # adapter -> the conventions it must be reported with
    "harness.adapters.hf_llama_rmsnorm": {"rmsnorm.eps": "convention:fixed", "rmsnorm.weight": "convention:weight"},
    "harness.adapters.hf_t5_layernorm": {"rmsnorm.eps": "convention:fixed", "rmsnorm.weight": "convention:weight"},
    "harness.adapters.hf_gemma_rmsnorm": {"rmsnorm.eps": "convention:fixed",
                                          "rmsnorm.weight": "convention:one_plus_weight"},
}


@pytest.mark.parametrize("planted,suite,tests,labels", DECLARED, ids=[d[0].removesuffix(".py") for d in DECLARED])
def test_declared_convention_passes(pytester, tmp_path, planted, suite, tests, labels):
    tests = tests or suite_tests(suite)
    assert_declared_passes(pytester, tmp_path / "report", suite, PLANTED / planted, tests, labels)


def test_convention_on_the_command_line_passes(pytester):
    """The undeclared fixed eps passes once ``--convention rmsnorm_eps=fixed`` is given."""
    result = run_suite(pytester, [suite_file("test_rmsnorm.py")], [PLANTED / "rms_fixed_eps_undeclared.py"],
                       "test_eps", "--convention", "rmsnorm_eps=fixed")
    result.assert_outcomes(passed=1)


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference, torch.nn (as is), the planted base and the Hugging Face RMSNorm adapters pass
    every norm property; names a target lacks are skipped by name; conventions are named."""
    pytest.importorskip("transformers")
    report = tmp_path / "report"
    impls = ["reference", "torch.nn", PLANTED / "_base.py", *HF_ADAPTERS]
    result = run_suite(pytester, [suite_file(f) for f in NORM_SUITES], impls, None,
                       "--conformance-report", str(report))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    family = {s: property_of(s, suite_tests(s)[0]).split(".")[0] for s in NORM_SUITES}
    for (prop, target), cell in cells.items():
        lacks = (target == "torch.nn" and prop.startswith("norm_placement.")) or (
            target in HF_ADAPTERS and not prop.startswith(family["test_rmsnorm.py"] + "."))
        if lacks:
            assert cell.startswith("skipped (target") and "has no attribute" in cell, (prop, target, cell)
        else:
            assert cell == "pass" or cell.startswith("convention:"), (prop, target, cell)
    for target in ("reference", "torch.nn", str(PLANTED / "_base.py")):
        assert cells[("rmsnorm.eps", target)] == "convention:finfo"
        assert cells[("rmsnorm.weight", target)] == "convention:weight"
    assert cells[("norm_placement.placement", "reference")] == "convention:pre"
    for adapter, labels in HF_ADAPTERS.items():
        for prop, label in labels.items():
            assert cells[(prop, adapter)] == label, (adapter, prop, cells[(prop, adapter)])


@pytest.mark.optional_libs("torchtune")
def test_torchtune_norms_pass(pytester, tmp_path):
    """torchtune's Fp32LayerNorm and RMSNorm (``harness.adapters.torchtune_norms``, on the shared
    ``last_dim_norm`` wrapper): every LayerNorm and RMSNorm property passes, torchtune's fixed eps
    and plain weight named; no residual block, so the placement suite skips by name."""
    report, target = tmp_path / "report", "harness.adapters.torchtune_norms"
    result = run_suite(pytester, [suite_file(f) for f in NORM_SUITES], [target], None, "--conformance-report", str(report))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    assert cells[("rmsnorm.eps", target)] == "convention:fixed" and cells[("rmsnorm.weight", target)] == "convention:weight"
    assert cells[("layernorm.standardized", target)] == "pass" and cells[("rmsnorm.scale_invariance", target)] == "pass"
    assert cells[("norm_placement.placement", target)].startswith("skipped")
