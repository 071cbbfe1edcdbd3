"""`python -m harness repro` replays a repro line pasted in any folder (issue 14)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from planted_support import HANG_LIMIT_S

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "attention" / "ignored_scale.py"
CONFIG = '{"type":"AttnConfig","batch":[1],"hq":1,"hkv":1,"L":3,"S":4,"E":4,"Ev":4,"dtype":"float64","seed":5}'


def _repro(cwd: Path, suite: str, impl: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", "repro", f"{suite}::check_scale", "--impl", impl,
                           "--config", CONFIG], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=HANG_LIMIT_S)


def test_a_relative_suite_path_replays_from_another_folder(tmp_path):
    """The path in a repro line is relative to the project; pasted elsewhere it still resolves, and
    the planted bug fails again (exit 1) while the reference passes (exit 0)."""
    failed = _repro(tmp_path, "suites/attention/test_attention.py", str(PLANTED))
    assert failed.returncode == 1 and "FAILED" in failed.stdout, failed.stdout + failed.stderr
    passed = _repro(tmp_path, "suites/attention/test_attention.py", "reference")
    assert passed.returncode == 0 and "PASSED" in passed.stdout, passed.stdout + passed.stderr


def test_an_unknown_suite_path_is_a_clear_error(tmp_path):
    done = _repro(tmp_path, "suites/no_such_suite.py", "reference")
    assert done.returncode != 0
    assert "no suite file 'suites/no_such_suite.py'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_wrong_signature_replays_as_one_failure(tmp_path):
    """A target whose protocol function has the wrong parameters fails (exit 1) with one line, as in
    the suites: no traceback (issue 41)."""
    target = ROOT / "tests" / "planted" / "hostile" / "wrong_signature.py"
    done = _repro(tmp_path, "harness.suites.attention.test_attention", str(target))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED" in done.stdout and "signature (q, k) lacks parameter(s) query, key, value" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
