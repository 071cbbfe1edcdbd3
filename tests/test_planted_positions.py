"""The position-encoding suites catch real bugs: each planted-bug target fails exactly the
property meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/positions/`` has one bug (its docstring says which, and which
public bug it mimics) on top of the correct ``_base.py``. Each case runs ONE suite test
in-process (``-k``) under the derandomized ``ci`` profile, so the outcome is the same on every
run. Controls: ``reference``, the Hugging Face adapter and the planted base pass every position
property with their conventions named; the x-transformers and torchtune adapters too when
installed (skipped otherwise), and report "does not load" when their library is absent.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from planted_support import assert_caught, conformance, run_suite, suite_file

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "positions"
POSITION_SUITES = ["test_rope.py", "test_sinusoidal.py", "test_learned_positions.py", "test_alibi.py",
                   "test_t5_bucket.py"]


def _suite_source(name: str) -> str:
    return suite_file(name).read_text()


def n_tests(suites) -> int:
    return sum(len(re.findall(r"^def test_\w+\(", _suite_source(f), re.M)) for f in suites)


def test_relative_names_a_wrong_frequency_table_as_its_cause(pytester):
    """A RoPE whose frequency exponent has the wrong sign fails rope.relative too: float32 rounds its
    too large angles (in float64 the score change all but vanishes). The message says so and names
    rope.frequencies, the property of the cause (issue 41: it said only "scores must depend only on
    the distance"); a relative failure of the positions themselves gets no such note."""
    assert_caught(pytester, "test_rope.py", PLANTED / "rope_exponent_sign_flipped.py", "test_relative",
                  ["must depend only on the distance", "replayed in float64 the same configuration",
                   "rounding the angles m * theta in float32, not from the positions",
                   "the target's rotation angles at position 1 are not base^(-2i/D)",
                   "the cause is the frequency table, which rope.frequencies checks"])
    # (a relative failure of the positions themselves gets no such note: rope_positions_clamped.py's
    # ``Absent:`` lines, checked by tests/test_planted_bugs.py)


def _all_pass(cells, target, skipped=()):
    for (prop, t), cell in cells.items():
        if t == target and not prop.startswith(skipped):
            assert cell == "pass" or cell.startswith("convention:"), (prop, t, cell)


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference, the Hugging Face adapter (Llama RoPE, Bloom ALiBi, T5 buckets, DistilBERT
    sinusoids) and the planted base pass every position property, conventions named; HF has
    no learned table and skips those two by name."""
    report = tmp_path / "report"
    hf = "harness.adapters.hf_positions"
    impls = ["reference", hf, PLANTED / "_base.py"]
    result = run_suite(pytester, POSITION_SUITES, impls, None, "--conformance-report", str(report))
    n_all, n_learned = n_tests(POSITION_SUITES), n_tests(["test_learned_positions.py"])
    result.assert_outcomes(passed=3 * n_all - n_learned, skipped=n_learned)
    cells = conformance(report)
    for target in ("reference", hf, str(PLANTED / "_base.py")):
        _all_pass(cells, target, skipped=("learned_positions.",) if target == hf else ())
    assert cells[("rope.frequencies", hf)] == "convention:rotate_half"
    assert cells[("rope.frequencies", str(PLANTED / "_base.py"))] == "convention:rotate_half"
    assert cells[("rope.frequencies", "reference")] == "convention:interleaved"
    assert cells[("sinusoidal.origin", hf)] == cells[("sinusoidal.origin", "reference")] == "convention:interleaved"
    assert cells[("learned_positions.lookup", hf)].startswith("skipped")


@pytest.mark.optional_libs("x_transformers")
def test_xtransformers_adapter_passes(pytester, tmp_path):
    """x-transformers (RoPE interleaved, concatenated sinusoids, ALiBi, T5 buckets, learned table)."""
    report, target = tmp_path / "report", "harness.adapters.xtransformers_positions"
    suites = POSITION_SUITES + ["test_rope_module.py"]  # its stateful RotaryEmbedding too
    result = run_suite(pytester, suites, [target], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=n_tests(suites))
    cells = conformance(report)
    _all_pass(cells, target)
    assert cells[("rope.frequencies", target)] == "convention:interleaved"
    assert cells[("sinusoidal.origin", target)] == "convention:concatenated"
    assert cells[("rope_module.call_sequences", target)] == "convention:interleaved"


@pytest.mark.optional_libs("torchtune")
def test_torchtune_adapter_passes(pytester, tmp_path):
    """torchtune's RotaryPositionalEmbeddings (interleaved); torchtune has no other position names."""
    report, target = tmp_path / "report", "harness.adapters.torchtune_positions"
    result = run_suite(pytester, ["test_rope.py"], [target], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=n_tests(["test_rope.py"]))
    assert conformance(report)[("rope.frequencies", target)] == "convention:interleaved"


@pytest.mark.parametrize("adapter,library", [("xtransformers_positions", "x_transformers"),
                                             ("torchtune_positions", "torchtune")])
def test_adapter_without_its_library_does_not_load(pytester, monkeypatch, adapter, library):
    """With the library absent the adapter raises a clean ImportError at import, and the suites
    report the target as not loading (a failure naming the missing package, not a crash)."""
    module = f"harness.adapters.{adapter}"
    monkeypatch.setitem(sys.modules, library, None)  # import of it now raises ImportError
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=f"needs {library.replace('_', '-')}|needs {library}"):
        __import__(module)
    monkeypatch.delitem(sys.modules, module, raising=False)
    # the library is hidden in this process only (sys.modules): the target must load here too
    result = run_suite(pytester, ["test_rope.py"], [module], "test_norm", "--isolation", "none")
    result.assert_outcomes(skipped=1)  # skipped with a one-line reason; the cause is printed once
    assert result.ret != 0  # and the session fails
    out = result.stdout.str()
    assert "DOES NOT LOAD" in out and "targets that do not load" in out and "pip install" in out, out[-2000:]
