"""Scaled RoPE (``rope_frequencies`` and the stateful ``ScaledRotaryEmbedding``, ``suites/rope_scaling/``):
the planted family's correct base, the float64 reference and Hugging Face transformers' own
initializers and rotary module pass every property; the dynamic rule's memory is measured and named
(``dynamic_update``); the planted bugs (``tests/planted/rope_scaling/``) are run by
``tests/test_planted_bugs.py``."""
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


def test_correct_scaled_rope_modules_pass_every_property(pytester, tmp_path):
    """The reference (per_call), the planted family's HF-style module and transformers' GPT-NeoX rotary
    module (both grow_until_reset, declared) pass every ``scaled_rope_module`` property."""
    report = tmp_path / "report"
    targets = [str(BASE), "reference", "harness.adapters.hf_scaled_rope"]
    result = run_suite(pytester, [suite_file("test_scaled_rope_module.py")], targets, None,
                       "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    props = {p for p, _ in cells if p.startswith("scaled_rope_module.")}
    assert len(props) == len(suite_tests("test_scaled_rope_module.py")), props
    for (prop, target), cell in cells.items():
        assert cell.startswith(("convention:", "pass")), (prop, target, cell)  # (the pairing named where measured)


@pytest.mark.parametrize("target, declared, measured", [
    ("harness.adapters.hf_scaled_rope", "per_call", "grow_until_reset"),
    ("reference", "grow_until_reset", "per_call")])
def test_dynamic_update_is_measured_and_named(pytester, target, declared, measured):
    """A module declared with the other ``dynamic_update`` fails by the named convention (the measured
    one in the message), not as a bug: transformers' module grows until reset, the reference follows
    each call."""
    result = run_suite(pytester, nodes(test_scaled_rope_module="test_call_sequences"), [target], None,
                       "--convention", f"dynamic_update={declared}")
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) == 1, out[-4000:]
    assert f"dynamic_update: the code follows {measured}" in out, out[-4000:]


@pytest.mark.optional_libs("torchtune", "x_transformers")
def test_torchtune_and_xtransformers_scaled_ropes_pass(pytester, tmp_path):
    """torchtune's ``Llama3ScaledRoPE`` and x-transformers' interpolated ``RotaryEmbedding``, as
    ``rope_frequencies`` (``*_rope_scaling``) and as the module their attention layers call
    (``*_scaled_rope``): the rule each has passes, the rules it does not have are unsupported, never
    failed; x-transformers' native partial rotary dims pass through. (One session: the module's
    one-call invariants are the reference's and HF's business above; here the calls and the rules.)"""
    report = tmp_path / "report"
    tt, xt = "harness.adapters.torchtune_rope_scaling", "harness.adapters.xtransformers_rope_scaling"
    ttm, xtm = "harness.adapters.torchtune_scaled_rope", "harness.adapters.xtransformers_scaled_rope"
    tests = nodes(test_rope_scaling="test_plain test_linear test_llama3_bands test_yarn",
                  test_scaled_rope_module="test_call_sequences test_agreement test_passthrough")
    result = run_suite(pytester, tests, [tt, xt, ttm, xtm], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    for prop, target in (("llama3_bands", tt), ("plain", tt), ("linear", xt), ("plain", xt)):
        # (a partial rotary factor, which neither module takes, is passed over: "pass; n of m ... unsupported")
        assert cells[(f"rope_scaling.{prop}", target)].startswith("pass"), cells
    assert cells[("rope_scaling.yarn", tt)].startswith("unsupported"), cells
    assert cells[("rope_scaling.llama3_bands", xt)].startswith("unsupported"), cells
    for prop in ("call_sequences", "agreement"):
        for target in (ttm, xtm):
            assert cells[(f"scaled_rope_module.{prop}", target)].startswith("convention:"), cells
    assert cells[("scaled_rope_module.passthrough", xtm)].startswith("pass"), cells
    assert cells[("scaled_rope_module.passthrough", ttm)].startswith("unsupported"), cells
