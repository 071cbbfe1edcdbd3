"""The normalization suites catch real bugs: each planted-bug target fails exactly the
property meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/norms/`` has one bug (its docstring says which, and which
public bug it mimics) on top of the correct ``_base.py``; the ``*_declared.py`` and
``block_post_norm.py`` files are controls that follow a declared or reported convention.
Each case runs ONE suite test in-process (``-k``) under the derandomized ``ci`` profile.
Controls: ``reference``, ``torch.nn``, the planted base and the Hugging Face adapters pass
every norm property, with their conventions named in the conformance table.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from planted_support import assert_caught, assert_declared_passes, conformance, property_of, run_suite, suite_file, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "norms"
NORM_SUITES = ["test_layernorm.py", "test_rmsnorm.py", "test_norm_placement.py"]

#: (planted target, suite file, the one suite test that must fail for it)
BUGS = [
    ("ln_unbiased_variance.py", "test_layernorm.py", "test_standardized"),
    ("ln_eps_outside_sqrt.py", "test_layernorm.py", "test_eps_inside_sqrt"),
    ("ln_no_mean_subtraction.py", "test_layernorm.py", "test_shift_scale_invariance"),
    ("ln_last_dim_only.py", "test_layernorm.py", "test_normalized_dims"),
    ("ln_whole_tensor.py", "test_layernorm.py", "test_normalized_dims"),
    ("ln_batch_statistics.py", "test_layernorm.py", "test_normalized_dims"),
    ("ln_ignores_bias.py", "test_layernorm.py", "test_affine"),
    ("ln_ignores_weight.py", "test_layernorm.py", "test_affine"),
    ("ln_fp16_compute.py", "test_layernorm.py", "test_large_values"),
    ("ln_ignores_eps.py", "test_layernorm.py", "test_eps_honoured"),
    ("ln_mean_by_matmul.py", "test_layernorm.py", "test_autocast"),
    ("rms_fp16_compute.py", "test_rmsnorm.py", "test_large_values"),
    ("rms_subtracts_mean.py", "test_rmsnorm.py", "test_no_mean_subtraction"),
    ("rms_fixed_eps_undeclared.py", "test_rmsnorm.py", "test_eps"),
    ("rms_eps_outside_sqrt.py", "test_rmsnorm.py", "test_eps"),
    ("rms_one_plus_weight_undeclared.py", "test_rmsnorm.py", "test_weight"),
    ("rms_ignores_weight.py", "test_rmsnorm.py", "test_weight"),
    ("rms_no_sqrt.py", "test_rmsnorm.py", "test_scale_invariance"),
    ("rms_last_dim_only.py", "test_rmsnorm.py", "test_normalized_dims"),
    ("rms_mean_square_by_matmul.py", "test_rmsnorm.py", "test_autocast"),
    ("block_no_norm.py", "test_norm_placement.py", "test_placement"),
    ("block_no_residual.py", "test_norm_placement.py", "test_placement"),
    ("block_post_declared_pre.py", "test_norm_placement.py", "test_placement"),
]

#: what the failure must say besides the property name, where the bug calls for it
MESSAGES = {
    "ln_unbiased_variance.py": ["the unbiased variance was used"],
    "ln_mean_by_matmul.py": ["autocast keeps norms in float32"],
    "rms_mean_square_by_matmul.py": ["autocast keeps norms in float32"],
    "ln_eps_outside_sqrt.py": ["eps is outside the square root"],
    "ln_ignores_bias.py": ["the bias is ignored"],
    "ln_ignores_weight.py": ["the weight is ignored"],
    "ln_ignores_eps.py": ["the constructor's eps is ignored"],
    "ln_whole_tensor.py": ["changed the output of the other tokens"],
    "ln_batch_statistics.py": ["changed the output of the other tokens"],
    "ln_last_dim_only.py": ["must span all of normalized_shape"],
    "rms_last_dim_only.py": ["must span all of normalized_shape"],
    "rms_subtracts_mean.py": ["the mean was subtracted"],
    "rms_fixed_eps_undeclared.py": ["convention mismatch", "rmsnorm_eps: the code follows fixed",
                                    "HARNESS_CONVENTIONS"],
    "rms_eps_outside_sqrt.py": ["rmsnorm_eps: the behaviour matches no known convention"],
    "rms_one_plus_weight_undeclared.py": ["convention mismatch", "rmsnorm_scale: the code follows one_plus_weight"],
    "rms_ignores_weight.py": ["rmsnorm_scale: the behaviour matches no known convention", "the weight is ignored"],
    "rms_no_sqrt.py": ["RMSNorm(", "vs RMSNorm(x)"],
    "block_no_norm.py": ["norm_placement: the behaviour matches no known convention"],
    "block_no_residual.py": ["norm_placement: the behaviour matches no known convention"],
    "block_post_declared_pre.py": ["convention mismatch", "norm_placement: the code follows post"],
}

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


def test_table_is_consistent():
    """Every planted file is listed, every norm property has a planted bug it catches."""
    files = {p.name for p in PLANTED.glob("*.py") if not p.name.startswith("_")}
    listed = {b for b, _, _ in BUGS} | {d[0] for d in DECLARED}
    assert files == listed, f"unlisted: {sorted(files - listed)}; missing: {sorted(listed - files)}"
    assert len(BUGS) >= 12
    for bug, suite, test in BUGS:
        assert test in suite_tests(suite), f"{bug}: {suite} has no {test}"
        doc = (PLANTED / bug).read_text()
        assert doc.startswith('"""Planted bug'), f"{bug}: module docstring must describe the bug"
        assert "Real pattern" in doc and "Caught by" in doc, f"{bug}: docstring lacks the real pattern"
        assert f"Caught by: {property_of(suite, test)}" in doc, f"{bug}: docstring names another property"
    properties = {property_of(s, t) for s in NORM_SUITES for t in suite_tests(s)}
    assert properties == {property_of(s, t) for _, s, t in BUGS}


@pytest.mark.parametrize("bug,suite,test", BUGS, ids=[b.removesuffix(".py") for b, _, _ in BUGS])
def test_planted_bug_is_caught(pytester, bug, suite, test):
    assert_caught(pytester, suite, PLANTED / bug, test, MESSAGES.get(bug, []))


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
