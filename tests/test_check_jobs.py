"""``harness check --jobs``: one run spread over pytest-xdist workers gives the report one process gives."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.basics import options

ROOT = Path(__file__).resolve().parents[1]
PLANTED = str(ROOT / "tests" / "planted" / "norms" / "ln_ignores_eps.py")


def test_jobs_resolution(monkeypatch):
    monkeypatch.setattr(options, "cores", lambda: 16)
    assert options.jobs("auto") == 8                      # the cores, at most MAX_AUTO_JOBS
    assert options.jobs("3") == 3 and options.jobs(None) == 1 and options.jobs(1) == 1
    assert options.jobs("auto", ["--pdb"]) == 1 and options.jobs("auto", ["-s"]) == 1
    assert options.jobs("auto", ["-p", "no:xdist"]) == 1
    assert options.jobs("auto", ["-n", "4"]) == 1 and options.jobs("auto", ["--numprocesses=4"]) == 1  # theirs
    assert options.jobs("auto", ["--strict-markers"]) == 8  # (not mistaken for -s)
    assert options.jobs("auto", keyword="rope") == 1 and options.jobs("auto", ["suites/x.py::test_y"]) == 1  # slices
    assert options.jobs("2", keyword="rope") == 2           # (as asked)
    monkeypatch.setattr(options, "cores", lambda: 1)
    assert options.jobs("auto") == 1
    for bad in ("0", "-2", "many"):
        with pytest.raises(ValueError, match="positive integer or auto"):
            options.jobs(bad)
    monkeypatch.setattr(options.importlib.util, "find_spec", lambda name: None)  # pytest-xdist missing
    assert options.jobs("auto") == 1
    with pytest.raises(ValueError, match="pip install pytest-xdist"):
        options.jobs("2")


def _run(tmp_path: Path, n: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    report = tmp_path / f"jobs{n}"
    done = subprocess.run([sys.executable, "-m", "harness", "check", "--impl", PLANTED, "--impl", "reference",
                           "--profile", "ci", "--jobs", n, "--report", str(report), "-k", "layernorm"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CI": "true"})
    rows = json.loads((report / "conformance.json").read_text())["results"]
    return done, sorted(({k: r.get(k) for k in ("property", "target", "kind", "detail", "repro", "error")} for r in rows),
                        key=lambda r: (r["property"], r["target"]))


def test_two_workers_report_what_one_process_reports(tmp_path):
    one, rows_one = _run(tmp_path, "1")
    two, rows_two = _run(tmp_path, "2")
    assert one.returncode == two.returncode == 1, two.stdout[-3000:] + two.stderr[-2000:]
    assert "check: 2 pytest-xdist workers" in two.stdout and "xdist" not in one.stdout
    assert rows_two == rows_one                       # the same verdicts, failures and reasons
    assert any(r["kind"] == "fail" and r["target"] == PLANTED for r in rows_two), rows_two  # the bug is caught
    assert "harness repro" in two.stdout              # and its repro line is printed
