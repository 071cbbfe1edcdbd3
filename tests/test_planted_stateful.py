"""The stateful rotary module's state machine catches cache bugs that no single call shows.

Every ``tests/planted/positions/stateful_rope_*.py`` target is the correct cached module of
``_base.py`` (``CachedRotary``) with one cache bug; each must fail ``rope_module.call_sequences``
under the derandomized ``ci`` profile, with a shrunk call *sequence* as the configuration and a
repro line that replays it and fails. Controls: ``reference`` and the planted base pass, their
pairing named. Real releases of rotary-embedding-torch (installed side by side, see
``harness/adapters/rotary_embedding_torch_<version>.py``): 0.2.6 (cache keyed on the length only) and 0.8.2 (a call at an offset
writes the table's first rows) fail; 0.2.7 and 0.8.3, which fixed them, pass. A release that
is not installed skips with the pip command, unless ``$HARNESS_REQUIRE_RELEASES`` is set (CI).

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

import sys

import pytest
import torch

from planted_support import ROOT, assert_call_program, assert_caught, conformance, release_target, run_suite

SUITE, TEST, PROPERTY = "test_rope_module.py", "test_call_sequences", "rope_module.call_sequences"
PLANTED = ROOT / "tests" / "planted" / "positions"


def test_correct_modules_pass(pytester, tmp_path):
    """reference (no cache, interleaved) and the planted base (a cos/sin cache keyed on length,
    dtype and device, rotate-half) pass, the pairing named."""
    report = tmp_path / "report"
    base = str(PLANTED / "_base.py")
    result = run_suite(pytester, [SUITE], ["reference", base], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=2)
    cells = conformance(report)
    assert cells[(PROPERTY, "reference")] == "convention:interleaved"
    assert cells[(PROPERTY, base)] == "convention:rotate_half"


def _release(version: str) -> str:
    """The release's target module (``harness/adapters/rotary_embedding_torch_<version>.py``)."""
    return release_target(f"harness.adapters.rotary_embedding_torch_{version.replace('.', '_')}",
                          f"ret-{version}", "rotary-embedding-torch", version)


@pytest.mark.parametrize("version", ["0.2.6", "0.8.2"])
def test_buggy_release_is_caught(pytester, version):
    """0.2.6: the second call of one length at another offset gets the first one's positions;
    0.8.2: after a call at an offset, a call from position 0 reads that call's rows."""
    out = assert_caught(pytester, SUITE, _release(version), TEST, ["on a fresh instance the same call is right"])
    assert len(assert_call_program(out)) >= 2


@pytest.mark.parametrize("version", ["0.2.7", "0.8.3"])
def test_fixed_release_passes(pytester, tmp_path, version):
    target = _release(version)
    report = tmp_path / "report"
    result = run_suite(pytester, [SUITE], [target], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=1)
    assert conformance(report)[(PROPERTY, str(target))] == "convention:interleaved"


@pytest.mark.optional_libs("torchtune")
def test_torchtune_module_passes(pytester, tmp_path):
    """torchtune's RotaryPositionalEmbeddings, one instance with its construction-time cache."""
    report, target = tmp_path / "report", "harness.adapters.torchtune_positions"
    result = run_suite(pytester, [SUITE], [target], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=1)
    assert conformance(report)[(PROPERTY, target)] == "convention:interleaved"


def test_adapter_without_the_library_does_not_import(monkeypatch):
    """Without rotary-embedding-torch the adapter raises an ImportError naming the pip install."""
    monkeypatch.setitem(sys.modules, "rotary_embedding_torch", None)
    monkeypatch.delitem(sys.modules, "harness.adapters.rotary_embedding_torch", raising=False)
    with pytest.raises(ImportError, match="pip install rotary-embedding-torch"):
        __import__("harness.adapters.rotary_embedding_torch")


def test_device_change_moves_the_module(monkeypatch):
    """Where there are two devices (``--device cuda``: the accelerator and the CPU) the machine
    moves the instance with ``.to(device)`` and keeps calling it there. This machine has one, so
    a second spelling of the CPU stands in for the second device: the rule runs, the module is
    moved, the calls after the move go to the new device, and the reference still passes."""
    import harness.reference.rope
    from harness import reference
    from harness.boundary.loader import load_target
    from harness.verdicts.outcome import Outcome
    from hypothesis import settings
    from hypothesis.stateful import run_state_machine_as_test
    from harness.suites.positions import test_rope_module as suite

    monkeypatch.setattr(suite, "module_devices", lambda target: [target.device, "cpu:0"])
    moves, to = [], torch.nn.Module.to
    monkeypatch.setattr(reference.rope.RotaryEmbedding, "to",
                        lambda self, *a, **kw: (moves.append(str(kw.get("device", a[0] if a else None))),
                                                to(self, *a, **kw))[1])
    target = load_target("reference", isolation="none")
    target.outcome = Outcome()
    try:
        run_state_machine_as_test(suite.machine_for(target), settings=settings(max_examples=10))
    finally:
        target.close()
    assert "cpu:0" in moves and "cpu" in moves, moves
