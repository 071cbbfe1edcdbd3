"""The T5 bias glue (``t5_relative_position_bias``, suites/positions/test_t5_bias.py) catches real bugs:
each planted target in ``tests/planted/t5_bias/`` fails exactly the property named for it;
the reference and the planted base pass. x-transformers 1.0.1 (queries aligned to the start
of the keys) fails ``t5_bias.end_alignment`` in the CI profile and 1.0.2 passes, each from a
side-by-side release (``pip install --target /tmp/libs/xt-1.0.X --no-deps x-transformers==1.0.X``;
skipped with the reason when absent; .ci/run installs them).

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from planted_support import conformance, release_target, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "t5_bias"
SUITE = "test_t5_bias.py"


def test_correct_targets_pass(pytester, tmp_path):
    """reference, the planted base and Hugging Face T5 (compute_bias with past_seen_tokens)."""
    report = tmp_path / "report"
    targets = ["reference", PLANTED / "_base.py", "harness.adapters.hf_positions"]
    result = run_suite(pytester, [SUITE], targets, None, "--conformance-report", str(report))
    result.assert_outcomes(passed=len(targets) * len(suite_tests(SUITE)))
    assert set(conformance(report).values()) == {"pass"}


def _release_target(version: str) -> str:
    return release_target(f"harness.adapters.xtransformers_{version.replace('.', '_')}_t5_bias",
                          f"xt-{version}", "x-transformers", version)


def test_xtransformers_1_0_1_is_caught(pytester):
    """1.0.1's q_pos = arange(i) puts a decoding step's query at position 0."""
    target = _release_target("1.0.1")
    result = run_suite(pytester, [SUITE], [target], "test_end_alignment")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "[t5_bias.end_alignment]" in out and "x-transformers 1.0.1" in out, out[-2000:]


def test_xtransformers_1_0_2_passes(pytester, tmp_path):
    target = _release_target("1.0.2")
    report = tmp_path / "report"
    result = run_suite(pytester, [SUITE], [target], None, "--conformance-report", str(report))
    result.assert_outcomes(passed=len(suite_tests(SUITE)))
    assert set(conformance(report).values()) == {"pass"}
    assert re.search(r"version 1\.0\.2", result.stdout.str())


def test_missing_release_names_the_install_command(monkeypatch, tmp_path):
    """Without the side-by-side folder the target does not load, and says how to install it
    (the release's own install command first, whether einops is installed or not)."""
    from harness.adapters.xtransformers_t5_bias import bias_function
    monkeypatch.setenv("HARNESS_LIBS", str(tmp_path))
    monkeypatch.setitem(sys.modules, "einops", None)  # an environment without einops
    with pytest.raises(ImportError, match=r"pip install --target .*xt-1\.0\.1 --no-deps x-transformers==1\.0\.1"):
        bias_function("1.0.1")


def test_release_without_einops_names_its_install_command(monkeypatch, tmp_path):
    """The release's code imports einops, which its --no-deps install leaves out (README command 1
    installs no x-transformers, which would bring it). Without einops the release self-tests skip
    with ``pip install einops`` (``release_target`` reads ``releases.missing``), and the target
    does not load, saying the same; never an ImportError that names no remedy."""
    from harness.adapters.releases import missing
    from harness.adapters.xtransformers_t5_bias import bias_function
    monkeypatch.setenv("HARNESS_LIBS", str(tmp_path))
    monkeypatch.delenv("HARNESS_REQUIRE_RELEASES", raising=False)
    release = tmp_path / "xt-1.0.1"
    (release / "x_transformers-1.0.1.dist-info").mkdir(parents=True)
    (release / "x_transformers").mkdir()
    (release / "x_transformers" / "x_transformers.py").write_text("")
    monkeypatch.setitem(sys.modules, "einops", None)
    why = "x-transformers 1.0.1 needs einops, which is not installed (pip install einops)"
    assert missing("xt-1.0.1", "x-transformers", "1.0.1") == why
    with pytest.raises(pytest.skip.Exception, match=re.escape(why)):
        _release_target("1.0.1")
    with pytest.raises(ImportError, match=r"needs einops \(pip install einops\)"):
        bias_function("1.0.1")
