"""The cached bias modules' state machine catches cache bugs that no single call shows.

Every ``tests/planted/positions/stateful_alibi_*.py`` / ``stateful_t5_*.py`` target is the correct
cached module of ``_base.py`` (``CachedAlibi``, ``CachedT5Bias``) with one cache bug; each must fail
its suite's ``call_sequences`` under the derandomized ``ci`` profile, with a shrunk call *sequence*
as the configuration and a repro line that replays it and fails. Controls: ``reference``, the
planted base, x-transformers (installed) and Hugging Face's T5Attention pass. Real releases of
x-transformers side by side (``harness/adapters/xtransformers_1_22_1x_alibi.py``): 1.22.16 (its
cache slices the first queries' rows) fails; 1.22.17, which fixed it, passes. A release that is not
installed skips with the pip command, unless ``$HARNESS_REQUIRE_RELEASES`` is set (CI).
"""
from __future__ import annotations

import re
import shlex

import pytest

from harness.cli import main as cli_main
from planted_support import ROOT, assert_call_program, assert_caught, conformance, release_target, run_suite

PLANTED = ROOT / "tests" / "planted" / "positions"
TEST = "test_call_sequences"
ALIBI, T5 = "test_alibi_module.py", "test_t5_bias_module.py"
SUITE_OF = {"alibi": ALIBI, "t5": T5}

#: planted bug -> what its failure must say (besides the property, the repro and the target)
BUGS = {
    "stateful_alibi_rows_from_start.py": ["on a fresh instance the same call is right"],
    "stateful_alibi_keys_only.py": ["returned shape", "the calls before it on the same instance"],
    "stateful_t5_values_cached.py": ["the bias was cached after the table changed"],
    "stateful_t5_buckets_by_key_len.py": ["on a fresh instance the same call is right"],
}


def suite_of(bug: str) -> str:
    return SUITE_OF[bug.split("_")[1]]


def test_table_is_consistent():
    files = {p.name for p in PLANTED.glob("stateful_alibi_*.py")} | {p.name for p in PLANTED.glob("stateful_t5_*.py")}
    assert files == set(BUGS), f"unlisted: {sorted(files - set(BUGS))}; missing: {sorted(set(BUGS) - files)}"
    for bug in BUGS:
        doc = (PLANTED / bug).read_text()
        family = "alibi_module" if suite_of(bug) == ALIBI else "t5_bias_module"
        assert doc.startswith('"""Planted bug') and "Real pattern" in doc, bug
        assert f"Caught by: {family}.call_sequences" in doc, bug


#: the bugs whose repro line is replayed (one per suite)
REPLAYED = {"stateful_alibi_rows_from_start.py", "stateful_t5_values_cached.py"}


@pytest.mark.parametrize("bug", sorted(BUGS), ids=[b.removesuffix(".py") for b in sorted(BUGS)])
def test_planted_bug_is_caught(pytester, capsys, bug):
    """Caught in the ci profile, shrunk to a sequence of at least two calls (each planted module
    gets a first call right). For ``REPLAYED``, the printed repro line replays the shrunk
    sequence on a fresh instance and fails at the same call, and passes on the correct base."""
    out = assert_caught(pytester, suite_of(bug), PLANTED / bug, TEST, BUGS[bug])
    assert len(assert_call_program(out)) >= 2, out[-3000:]
    if bug in REPLAYED:
        line = out.split("repro:", 1)[1].splitlines()[0].strip()
        failing_call = re.search(r"call \d+ of \d+", out).group(0)
        status, replay = _repro(capsys, line)
        assert status == 1 and "FAILED" in replay and failing_call in replay, replay[-3000:]
        status, control = _repro(capsys, line, impl=str(PLANTED / "_base.py"))
        assert status == 0 and "PASSED" in control, control[-2000:]


def _repro(capsys, line: str, impl: str | None = None) -> tuple[int, str]:
    args = shlex.split(line)
    assert args[:4] == ["python", "-m", "harness", "repro"], line
    if impl is not None:
        args[args.index("--impl") + 1] = impl
    capsys.readouterr()
    status = cli_main(args[3:])
    return status, capsys.readouterr().out


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
    from harness.loader import load_target
    from harness.outcome import Outcome
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
