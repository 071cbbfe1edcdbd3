"""The plug-in is loaded by every pytest run in an environment where the harness is installed
(entry point ``pytest11``). In another project's session it must change nothing global: not the
Hypothesis profile (30 examples, no deadline), not torch's thread count, not the header."""
from __future__ import annotations

import os

import pytest

from harness.basics.scope import is_harness_session

pytest_plugins = ["pytester"]

PROBE = """
import torch
from hypothesis import settings

def test_probe():
    print("PROBE", settings._current_profile, settings.default.max_examples, torch.get_num_threads())
"""


def _probe(pytester: pytest.Pytester, *args: str) -> tuple[str, str]:
    pytester.makepyfile(test_other_project=PROBE)
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()
    line = next(ln for ln in result.outlines if "PROBE" in ln)
    return line[line.index("PROBE"):], result.stdout.str()


def test_another_projects_session_is_left_alone(pytester, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # torch caps it at the cores
    monkeypatch.delenv("HARNESS_IMPL", raising=False)
    line, out = _probe(pytester)
    _, profile, examples, threads = line.split()
    assert profile in ("default", "ci") and examples == "100", line
    assert int(threads) == min(2, os.cpu_count() or 1), line
    assert "target reference" not in out and "harness 0." not in out


def test_a_harness_session_gets_its_profile_and_one_thread(pytester, monkeypatch):
    """The contrast that makes the test above able to fail: with --impl, the same probe sees the
    harness's profile and one torch thread, and the header names the target."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.delenv("CI", raising=False)
    line, out = _probe(pytester, "--impl", "reference")
    _, profile, examples, threads = line.split()
    assert (profile, examples, threads) == ("harness-dev", "30", "1"), line
    assert "target reference" in out


@pytest.mark.parametrize("cwd, args, expected", [
    ("root", ["suites"], True), ("root", ["suites/attention/test_attention.py::test_scale"], True),
    ("root", ["tests"], True), ("root", [], False), ("root", ["."], True),
    ("elsewhere", ["tests"], False), ("elsewhere", ["mypkg/tests"], False),
    ("elsewhere", ["harness.suites"], True),  # `pytest --pyargs harness.suites`
    ("elsewhere", ["harness.suites.attention.test_attention"], True),
    # a user's own `suites` package (or `--pyargs suites`) is theirs, never a harness session
    ("elsewhere", ["suites"], False), ("elsewhere", ["suites/attention/test_attention.py"], False),
])
def test_is_harness_session_by_path(monkeypatch, tmp_path, cwd, args, expected):
    from harness.basics import layout
    monkeypatch.chdir(layout.CHECKOUT if cwd == "root" else tmp_path)
    monkeypatch.delenv("HARNESS_IMPL", raising=False)

    class Config:
        def getoption(self, name):
            return None

    Config.args = args
    assert is_harness_session(Config()) is expected
    monkeypatch.setenv("HARNESS_IMPL", "mypkg")
    assert is_harness_session(Config()) is True
