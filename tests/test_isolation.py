"""Target isolation (harness/boundary/isolation.py, harness/boundary/worker.py): each target runs in its own
worker process, so a crash, a hang, a global patch or a flood of output in it fails *its*
properties with a message naming the cause, and cannot reach the harness, the reference
computations or another target in the same session.

The hostile targets live in ``tests/planted/isolation/``; each runs next to ``reference`` (or
``torch.nn.functional``) on three attention properties, in-process (pytester), so the session
that survives is this test's own.
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import time

import pytest

from tests.planted_support import HANG_LIMIT_S
from test_hostile_targets import (assert_each_property_reported, assert_reference_unaffected,
                                  outcomes_by_target, run_suites)

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "isolation"


def planted(name: str) -> str:
    return str(PLANTED / name)


# ---- a call that kills or hangs the worker fails that property, with the cause ----------------

DEATHS = [
    ("os_exit.py", "the worker process exited with status 0 (os._exit or a native exit in the target) "
                   "during scaled_dot_product_attention(Tensor("),
    ("segfault.py", "the worker process died with SIGSEGV during scaled_dot_product_attention(Tensor("),
    ("killed.py", "the worker process died with SIGKILL during scaled_dot_product_attention(Tensor("),
    ("swallows_timeout.py", "did not return within the per-call limit of 1 s (--impl-timeout); its worker "
                            "process was killed"),
    ("ignores_sigalrm.py", "did not return within the per-call limit of 1 s (--impl-timeout); its worker "
                           "process was killed"),
]


@pytest.mark.parametrize("name,message", DEATHS, ids=[d[0].removesuffix(".py") for d in DEATHS])
def test_a_call_that_kills_or_hangs_the_worker_fails_with_its_cause(pytester, name, message):
    target = planted(name)
    result = run_suites(pytester, [target, "reference"], profile="hostile-one-call",
                        extra=("--impl-timeout", "1"))
    result.assert_outcomes(passed=3, failed=3)
    assert result.ret != 0
    out = result.stdout.str()
    assert message in out, f"expected {message!r}:\n{out[-4000:]}"
    assert_each_property_reported(result, target)
    assert out.count("repro:") >= 3
    assert_reference_unaffected(result)


def test_the_repro_line_replays_a_worker_crash(pytester):
    """The one-line repro of a crash runs the same call through a worker and reports it."""
    target = planted("segfault.py")
    result = run_suites(pytester, [target], k="test_agreement", profile="hostile-one-call")
    repro = re.search(r"repro:\s+python -m harness repro (\S+) --impl (\S+) --config '(.+?)'",
                      result.stdout.str())
    assert repro, result.stdout.str()[-3000:]
    done = subprocess.run([sys.executable, "-m", "harness", "repro", repro.group(1), "--impl", repro.group(2),
                           "--config", repro.group(3)], cwd=ROOT, capture_output=True, text=True, timeout=HANG_LIMIT_S)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the worker process died with SIGSEGV during scaled_dot_product_attention" in done.stdout


# ---- global state a target changes stays in its own process ---------------------------------

def test_a_patched_torch_exp_fails_the_target_and_not_torch(pytester):
    """The patch is 0.2 off: the target fails agreement; torch's SDPA beside it passes all."""
    target = planted("patches_torch_exp.py")
    result = run_suites(pytester, [target, "torch.nn.functional"])
    counts = outcomes_by_target(result)
    assert counts.get("torch.nn.functional") == {"PASSED": 3}, result.stdout.str()[-3000:]
    assert counts.get(target, {}).get("FAILED", 0) >= 1, result.stdout.str()[-3000:]
    assert "[attention.agreement] property violated for target" in result.stdout.str()


def test_a_patched_torch_sdpa_does_not_reach_the_torch_target(pytester):
    target = planted("patches_torch_sdpa.py")
    result = run_suites(pytester, [target, "torch.nn.functional"])
    result.assert_outcomes(passed=6)


def test_a_patch_of_the_harness_own_comparison_changes_nothing(pytester):
    """It patched harness.spec.tolerance in its own process; the comparison runs in the harness's."""
    target = planted("patches_harness.py")
    result = run_suites(pytester, [target, "reference"])
    counts = outcomes_by_target(result)
    assert counts.get(target, {}).get("FAILED", 0) >= 2, result.stdout.str()[-3000:]
    assert_reference_unaffected(result)


# ---- output is captured and capped ----------------------------------------------------------

def test_a_flood_of_output_is_capped(pytester):
    """2 MiB per call: each call keeps its first and last KiB, each test at most 16 KiB."""
    target = planted("floods_output.py")
    result = run_suites(pytester, [target, "reference"])
    out = result.stdout.str()
    assert "FLOOD-START" in out and "FLOOD-END" in out
    assert "bytes of output dropped ...]" in out
    assert len(out) < 400_000, f"{len(out):,} characters of log"
    assert_reference_unaffected(result)


# ---- a target that does not load: one clear error, its tests skipped, exit non-zero ---------

LOAD_FAILURES = [
    ("os_exit_on_import.py", "the worker process exited with status 0"),
    ("keyboard_interrupt_on_import.py", "KeyboardInterrupt"),
    ("getattr_raises.py", "RuntimeError: lazy import of HARNESS_"),
    ("declares_dtypes_int.py", "broken declaration: HARNESS_DTYPES = 7: expected a tuple of dtype names"),
    ("declares_dtypes_string.py", "broken declaration: HARNESS_DTYPES = 'float16' is a single value where a "
                                  "tuple belongs; write ('float16',)"),
    ("declares_empty_sizes.py", "broken declaration: HARNESS_SIZES['E'] = range(16, 16) is empty"),
    ("declares_unknown_convention.py", "broken declaration: HARNESS_CONVENTIONS['causal_alignment'] = "
                                       "'bottom_left' is not a value of that convention"),
    ("declares_unknown_size_field.py", "broken declaration: HARNESS_SIZES names 'head_dim', which no "
                                       "configuration has"),
    ("declares_unknown_unsupported.py", "broken declaration: HARNESS_UNSUPPORTED names unknown feature(s) "
                                        "['flash']"),
]


@pytest.mark.parametrize("name,message", LOAD_FAILURES, ids=[f[0].removesuffix(".py") for f in LOAD_FAILURES])
def test_a_target_that_does_not_load_is_one_clear_error(pytester, name, message, tmp_path):
    target = planted(name)
    result = run_suites(pytester, [target, "reference"], extra=("--conformance-report", str(tmp_path)))
    result.assert_outcomes(passed=3, skipped=3)
    assert result.ret != 0, "a target that does not load must not give exit 0"
    out = result.stdout.str()
    header, _, summary = out.partition("= targets that do not load =")
    assert summary, out[-4000:]
    assert message in header.split("collected")[0], f"the report header does not say {message!r}:\n{header}"
    assert summary.count(f"target {target!r}: ") == 1 and message in summary, summary
    assert out.count("Traceback (most recent call last)") == 0
    assert_reference_unaffected(result)
    table = (tmp_path / "conformance.md").read_text()
    assert "error" in table and "pass" in table  # the table is written, the reference's column too


def test_an_import_that_hangs_is_bounded(pytester):
    """Alone (a short --import-timeout would bound a well-behaved target's import too, and how
    long that takes depends on the machine's load)."""
    target = planted("hangs_on_import.py")
    result = run_suites(pytester, [target], extra=("--import-timeout", "2"))
    result.assert_outcomes(skipped=3)
    assert result.ret != 0
    assert "import of " + target + " did not return within the per-call limit of 2 s (--import-timeout)" \
        in result.stdout.str()


# ---- the real command line: the session ends, its exit status is honest ----------------------

def test_check_exits_non_zero_and_ends_despite_an_exit_and_a_stray_thread(tmp_path):
    """``harness check`` (a subprocess, as a user runs it) with a target that calls os._exit(0)
    and one that leaves a non-daemon thread running: it ends, says why, exits 1, and writes the
    conformance table with the reference's column."""
    report = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", "--impl", planted("os_exit.py"),
         "--impl", planted("nondaemon_thread.py"), "--impl", "reference", "--profile", "ci",
         "--report", str(report), "-k", "test_agreement and not window", "--", "--tb=line"],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_LIMIT_S)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "the worker process exited with status 0" in done.stdout
    rows = {r["property"]: r for r in csv.DictReader((report / "conformance.csv").open())}
    agreement = rows["attention.agreement"]
    assert agreement[planted("os_exit.py")] == "fail", rows
    assert agreement[planted("nondaemon_thread.py")] == "pass", rows
    assert agreement["reference"] == "pass", rows


def test_a_build_runs_under_the_import_limit_and_a_call_under_the_per_call_one():
    """A slow BUILD (``target_ops.seeded``: a model constructed on the worker, which may import its
    libraries first) gets ``--import-timeout``; the same wait in a plain call past ``--impl-timeout``
    is a hang (under load 12, BERT-base's first build took over the 20 s per-call limit)."""
    from harness.boundary.loader import load_target
    from harness.runner import on_target
    from harness.boundary.guard import ImplementationError
    from harness.boundary.target_ops import seeded
    target = load_target(str(PLANTED / "slow_build.py"), isolation="process", timeout=1, import_timeout=60)
    try:
        model = on_target(target, seeded, 0, target.lookup("build_model"))
        assert model is not None
        with pytest.raises(ImplementationError, match="per-call limit of 1 s"):
            on_target(target, time.sleep, 3)
    finally:
        target.close()


def test_the_spin_sees_a_waiting_message_and_gives_up_without_one():
    """``wire.spin``: both ends watch the pipe for a few ms before they sleep (a wake-up costs
    more than most calls take); it must say whether a message came, and end when none does."""
    import multiprocessing as mp
    from harness.boundary import wire
    here, there = mp.Pipe()
    try:
        assert wire.spin(here, 0.002) is False
        there.send_bytes(b"request")
        assert wire.spin(here, 60.0) is True  # (returns as soon as it is there, not after 60 s)
        assert here.recv_bytes() == b"request"
        assert wire.spin(here, 0.0) is False
    finally:
        here.close()
        there.close()


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_work_on_the_target_counts_as_the_targets_time(isolation):
    """``on_target`` work (harness code run next to the target's objects: in its worker when isolated)
    is the target's time in the per-property timing, isolated as in-process (issue 46: the isolated
    run's "harness" share hid it)."""
    from harness.boundary.loader import load_target
    from harness.runner import on_target
    target = load_target("reference", isolation=isolation, timeout=20)
    try:
        before = target.limit.spent
        on_target(target, time.sleep, 0.3)
        assert target.limit.spent - before >= 0.3
    finally:
        target.close()
