"""``harness bench`` runs and measures the target in its worker process (issue 10, point 4):
every request has a wall-clock limit, a crash fails the point in flight and not the run, and
what the target does to torch cannot reach the harness's comparison kernels.

The hostile runs are subprocesses (as a user runs ``harness bench``): in this process the
forkserver the workers fork from may have started already without the suites' modules, and
their import (seconds) would then count against the tight limits used here. No timing is
asserted; the limits only bound how long a hung target can hold the run.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.bench.on_target import PointCall, point_call
from harness.bench.scaling import _inputs
from harness.bench.store import read_jsonl
from harness.cli import main as cli_main
from harness.boundary.loader import load_target
from harness.runner import on_target
from tests.planted_support import HANG_LIMIT_S

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "planted" / "isolation"
P = {"n": 16, "batch": 1, "heads": 2, "head_dim": 8, "dtype": "float32"}


def bench_subprocess(out: Path, impl: Path, *extra: str) -> tuple[int, str, list[dict]]:
    proc = subprocess.run([sys.executable, "-m", "harness", "bench", "--impl", str(impl), "--out", str(out),
                           "--profile", "tiny", "--device", "cpu", "--no-progress", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_LIMIT_S)
    rows = read_jsonl(out / "results.jsonl") if (out / "results.jsonl").exists() else []
    return proc.returncode, proc.stdout + proc.stderr, rows


def test_a_segfault_fails_each_point_with_its_cause_and_the_run_goes_on(tmp_path):
    """Every point of the crashing target is an error naming the signal (its worker restarted for
    the next one); the comparison kernel measured in the same run is ok."""
    code, output, rows = bench_subprocess(tmp_path / "run", HOSTILE / "segfault.py", "--suite", "scaling",
                                          "--cases", "target.sdpa,reference.naive", "--passes", "fwd")
    assert code == 0, output  # the run completed: its points carry the verdicts
    target = [r for r in rows if r["case"] == "target.sdpa"]
    assert len(target) == 3 and all(r["status"] == "error" and "SIGSEGV" in r["reason"] for r in target), rows
    assert "scaled_dot_product_attention" in target[0]["reason"]
    naive = [r for r in rows if r["case"] == "reference.naive"]
    assert len(naive) == 3 and all(r["status"] == "ok" for r in naive)


def test_a_hung_kernel_is_killed_at_the_limit_and_not_called_again(tmp_path):
    """A kernel that swallows every exception in a retry loop: the first point is killed at
    --impl-timeout, the other points of that kernel are not called again (each says why), and the
    receptive-field stack (harness code with the kernel inside, in the worker) is bounded too."""
    code, output, rows = bench_subprocess(tmp_path / "run", HOSTILE / "swallows_timeout.py",
                                          "--suite", "scaling,kv_cache", "--cases", "target.sdpa,mha",
                                          "--impl-timeout", "3", "--passes", "fwd")
    assert code == 0, output
    sdpa = [r for r in rows if r["case"] == "target.sdpa"]
    assert [r["status"] for r in sdpa] == ["error"] * 3
    assert "did not return within the per-call limit of 3 s" in sdpa[0]["reason"]
    assert all("not called again" in r["reason"] for r in sdpa[1:])
    (mha,) = [r for r in rows if r["case"] == "mha"]
    assert mha["status"] == "error" and "per-call limit of 3 s" in mha["reason"]


def test_a_target_patching_torch_changes_no_comparison_kernel(tmp_path):
    """The target replaces torch's SDPA with zeros at import: in its own worker only. torch's
    kernel, measured here under its own name, still gives finite ok rows, and this process's
    torch is untouched."""
    before = F.scaled_dot_product_attention
    out = tmp_path / "run"
    assert cli_main(["bench", "--impl", str(HOSTILE / "patches_torch_sdpa.py"), "--out", str(out),
                     "--profile", "tiny", "--device", "cpu", "--no-progress", "--suite", "scaling",
                     "--cases", "target.sdpa,torch.sdpa.math"]) == 0
    assert F.scaled_dot_product_attention is before
    rows = read_jsonl(out / "results.jsonl")
    assert {r["case"] for r in rows} == {"target.sdpa", "torch.sdpa.math"}
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]


def test_point_call_is_timed_where_the_target_lives(tmp_path):
    """The worker's ``PointCall`` validates (output, peak memory), calibrates and times blocks in
    the worker; the same class runs the comparison kernels here, with the same results' shape."""
    target = load_target("reference", cli_conventions={}, device="cpu", isolation="process", timeout=120)
    try:
        remote = on_target(target, point_call, target.lookup("scaled_dot_product_attention"), _inputs, P,
                           "cpu", (), {"is_causal": True})
        local = PointCall(F.scaled_dot_product_attention, _inputs(P, "cpu"), {"is_causal": True})
        for call in (remote, local):
            out, mem = call.validate("cpu", 2, None)
            assert isinstance(out, torch.Tensor) and out.shape == (1, 2, 16, 8)
            assert {"peak_mem_bytes", "peak_mem_method"} <= set(mem)
            number, elapsed = call.calibrate(0.001, True)
            assert number >= 1 and elapsed > 0
            assert call.block(number) > 0
        torch.testing.assert_close(remote.validate("cpu", 1, None)[0], local.validate("cpu", 1, None)[0])
    finally:
        target.close()


def test_bench_without_isolation_still_runs_in_process(tmp_path):
    out = tmp_path / "run"
    assert cli_main(["bench", "--impl", "reference", "--isolation", "none", "--out", str(out), "--profile",
                     "tiny", "--device", "cpu", "--no-progress", "--suite", "receptive_field",
                     "--cases", "target.sliding_window"]) == 0
    rows = read_jsonl(out / "results.jsonl")
    assert [r["status"] for r in rows] == ["ok"] * 3 and all(r["metrics"]["match"] for r in rows)


@pytest.mark.parametrize("suite,case", [("receptive_field", "target.sliding_window"), ("kv_cache", "gqa")])
def test_target_work_with_autograd_or_a_model_runs_in_the_worker(tmp_path, suite, case):
    """The receptive field differentiates through the target's kernel and the KV-cache decoder
    builds a model on it: both run whole in the worker and give the reference's results."""
    pytest.importorskip("transformers")
    out = tmp_path / "run"
    assert cli_main(["bench", "--impl", "reference", "--out", str(out), "--profile", "tiny", "--device",
                     "cpu", "--no-progress", "--suite", suite, "--cases", case]) == 0
    rows = read_jsonl(out / "results.jsonl")
    assert rows and all(r["status"] == "ok" and r["metrics"]["match"] for r in rows), rows
