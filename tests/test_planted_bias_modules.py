"""The cached bias modules' state machine catches cache bugs that no single call shows.

Every ``tests/planted/positions/stateful_alibi_*.py`` / ``stateful_t5_*.py`` target is the correct
cached module of ``_base.py`` (``CachedAlibi``, ``CachedT5Bias``) with one cache bug; each must fail
its suite's ``call_sequences`` under the derandomized ``ci`` profile, with a shrunk call *sequence*
as the configuration and a repro line that replays it and fails. Controls: ``reference``, the
planted base, x-transformers (installed) and Hugging Face's T5Attention pass. Real releases of
x-transformers side by side (``harness/adapters/xtransformers_1_22_1x_alibi.py``): 1.22.16 (its
cache slices the first queries' rows) fails; 1.22.17, which fixed it, passes. A release that is not
installed skips with the pip command, unless ``$HARNESS_REQUIRE_RELEASES`` is set (CI).

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

import pytest

from planted_support import ROOT, assert_call_program, assert_caught, conformance, release_target, run_suite

PLANTED = ROOT / "tests" / "planted" / "positions"
TEST = "test_call_sequences"
ALIBI, T5 = "test_alibi_module.py", "test_t5_bias_module.py"


@pytest.mark.optional_libs("x_transformers")
def test_correct_modules_pass(pytester, tmp_path):
    """reference (no cache), the planted bases (a sliced bias buffer; a bucket cache), x-transformers'
    own modules (AlibiPositionalBias keeps a buffer) and Hugging Face's T5Attention pass."""
    pytest.importorskip("harness.adapters.hf_positions", exc_type=ImportError)
    report = tmp_path / "report"
    targets = ["reference", str(PLANTED / "_base.py"), "harness.adapters.xtransformers_positions",
               "harness.adapters.hf_positions"]
    result = run_suite(pytester, [ALIBI, T5], targets, None, "--conformance-report", str(report))
    result.assert_outcomes(passed=7, skipped=1)  # hf_positions has no ALiBi module (Bloom has no cache)
    cells = conformance(report)
    for prop in ("alibi_module.call_sequences", "t5_bias_module.call_sequences"):
        for t in targets[:3]:
            assert cells[(prop, t)] == "pass", (prop, t, cells[(prop, t)])
    assert cells[("t5_bias_module.call_sequences", targets[3])] == "pass"


def _release(version: str) -> str:
    return release_target(f"harness.adapters.xtransformers_{version.replace('.', '_')}_alibi",
                          f"xt-{version}", "x-transformers", version)


def test_buggy_release_is_caught(pytester):
    """x-transformers 1.22.16: after a longer call, a call with fewer queries reads the rows of the
    first queries."""
    out = assert_caught(pytester, ALIBI, _release("1.22.16"), TEST, ["on a fresh instance the same call is right"])
    assert len(assert_call_program(out)) >= 2


def test_fixed_release_passes(pytester, tmp_path):
    target = _release("1.22.17")
    report = tmp_path / "report"
    run_suite(pytester, [ALIBI], [target], None, "--conformance-report", str(report)).assert_outcomes(passed=1)
    assert conformance(report)[("alibi_module.call_sequences", str(target))] == "pass"


def test_device_change_moves_the_module(monkeypatch):
    """With two devices (here two names of the CPU, standing in for ``--device cuda`` and the CPU)
    the machine moves the module with ``.to(device)`` and goes on calling the same instance."""
    import torch
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test

    from harness import reference
    from harness.boundary.loader import load_target
    from harness.verdicts.outcome import Outcome
    from harness.suites.positions import module_calls
    from harness.suites.positions import test_t5_bias_module as suite

    monkeypatch.setattr(module_calls, "module_devices", lambda target: [target.device, "cpu:0"])
    moves, to = [], torch.nn.Module.to
    monkeypatch.setattr(reference.T5RelativePositionBias, "to",
                        lambda self, *a, **kw: (moves.append(str(kw.get("device", a[0] if a else None))),
                                                to(self, *a, **kw))[1])
    target = load_target("reference", isolation="none")
    target.outcome = Outcome()
    try:
        run_state_machine_as_test(module_calls.machine_for(target, suite.SPEC, suite.check_call_sequences),
                                  settings=settings(max_examples=10))
    finally:
        target.close()
    assert "cpu:0" in moves and "cpu" in moves, moves
