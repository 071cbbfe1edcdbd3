"""A busy machine must not turn slowness into failures (issue 42; harness/boundary/progress.py): a call past
its per-call limit is judged by the CPU time it consumes. One that keeps computing is SLOW (passed,
reported), up to a ceiling of CPU time; one that does not compute (a sleep, a deadlock) HANGS and
ends at the limit, as always; a name's first call in a worker that imports modules gets the
import allowance.

The slowness is made deterministic by a tiny limit (0.5 s) and calls that do a fixed amount of CPU
work (measured in the thread's own CPU time, so a loaded machine stretches their wall time but not
the work): what is judged is the same as for a 20 s call on a machine under load. The verdicts'
rules themselves are checked first on a simulated clock (no process, no timing).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from harness import runner
from harness.boundary import guard, progress
from tests.planted_support import source_target

LIMIT = 0.5

SOURCE = textwrap.dedent('''
    import importlib, sys, time

    def burn(seconds):  # steady CPU work: `seconds` of this thread's CPU time, however long that takes
        end = time.thread_time() + seconds
        n = 0
        while time.thread_time() < end:
            n += 1
        return n

    def sleeps(seconds):
        time.sleep(seconds)
        return seconds

    def spins():
        while True:
            pass

    def double(x):
        return 2 * x

    def uses(folder, name):  # a library imported on first use (as transformers' lazy modules are)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return importlib.import_module(name).__name__
''')

#: a module whose import burns CPU (``SECONDS`` of it; ``None``: forever), like a heavy library's
SLOW_IMPORT = textwrap.dedent('''
    import time
    SECONDS = {seconds}
    _end = time.thread_time() + (SECONDS if SECONDS is not None else float("inf"))
    while time.thread_time() < _end:
        pass
''')


@pytest.fixture(params=["process", "none"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "slow_target", SOURCE, request.param, timeout=LIMIT)


# ---- the rules, on a simulated clock ---------------------------------------------------------

class Simulated:
    """A wall clock and a CPU clock the test advances: ``run(seconds, share)`` lets the call run
    ``seconds`` using ``share`` of one core, looking at it as the worker backend does."""

    def __init__(self, monkeypatch, limit=LIMIT, **kw):
        self.now = self.cpu = 0.0
        monkeypatch.setattr(progress, "_now", lambda: self.now)
        self.clock = progress.Clock(limit, **kw)
        self.clock.watch(lambda: self.cpu)

    def run(self, seconds: float, share: float) -> tuple[float, str | None]:
        """(the time of the verdict, the verdict), or (the time reached, None)."""
        end = self.now + seconds
        while self.now < end - 1e-9:
            step = min(self.clock.next_look(), progress.POLL_S, end - self.now)
            self.now += step
            self.cpu += step * share
            why = self.clock.look()
            if why is not None:
                return self.now, why
        return self.now, None


def test_a_call_that_does_not_compute_hangs_at_the_limit(monkeypatch):
    sim = Simulated(monkeypatch)
    at, why = sim.run(60, share=0.01)
    assert at == pytest.approx(LIMIT) and why.startswith("it was not computing")


def test_a_call_that_computes_on_a_busy_machine_is_slow_until_its_cpu_ceiling(monkeypatch):
    """At 10 % of a core (a 2-core machine under load 20) a call goes on past its limit, and ends
    when it has used CEILING x the limit of CPU: its wall time is stretched, its ceiling is not."""
    sim = Simulated(monkeypatch)
    at, why = sim.run(3 * LIMIT, share=0.1)
    assert why is None and sim.clock.slow
    at, why = sim.run(600, share=0.1)
    assert "ceiling of 2.5 s (5 x the limit)" in why
    assert sim.cpu == pytest.approx(progress.CEILING * LIMIT, abs=0.1)
    assert at == pytest.approx(progress.CEILING * LIMIT / 0.1, rel=0.05)


def test_a_call_that_stops_computing_past_the_limit_is_stopped_within_a_window(monkeypatch):
    """Computing, then a deadlock: stopped once a window (WINDOW_S) holds no CPU time."""
    sim = Simulated(monkeypatch, limit=2.0)
    assert sim.run(3.0, share=1.0)[1] is None
    at, why = sim.run(60, share=0.0)
    assert why.startswith("it computed past the limit, then stopped computing")
    assert 3.0 + progress.WINDOW_S - progress.POLL_S <= at <= 3.0 + progress.WINDOW_S + progress.POLL_S


def test_the_share_is_measured_over_the_last_window(monkeypatch):
    """A long call that computed early and then waits for a second is a hang at its limit: the
    whole call's average (here 90 %) does not hide the last second's idleness."""
    sim = Simulated(monkeypatch, limit=10.0)
    assert sim.run(9.0, share=1.0)[1] is None
    at, why = sim.run(5, share=0.0)
    assert at == pytest.approx(10.0) and why.startswith("it was not computing")


def test_a_first_call_that_imports_gets_the_import_allowance(monkeypatch):
    imported = [0]
    sim = Simulated(monkeypatch, allowance=60.0, imports=lambda: imported[0])
    imported[0] += 400  # (the call imports a library)
    at, why = sim.run(600, share=1.0)
    assert "ceiling of 60 s (the import allowance" in why and sim.cpu == pytest.approx(60, abs=0.3)
    busy = Simulated(monkeypatch, allowance=60.0, imports=lambda: 0)  # a first call that imports nothing
    assert "ceiling of 2.5 s (5 x the limit)" in busy.run(600, share=1.0)[1]


def test_without_cpu_time_a_call_is_judged_by_the_limit_alone(monkeypatch):
    monkeypatch.setattr(progress, "_now", lambda: 0.0)
    clock = progress.Clock(LIMIT)
    clock.watch(lambda: None)  # (not Linux; the process is gone)
    monkeypatch.setattr(progress, "_now", lambda: LIMIT)
    assert clock.look() == ""


def test_a_call_watched_late_is_not_judged_on_an_empty_window(monkeypatch):
    """A call read later (``runner.submit``) may be watched first after its limit: it gets a
    window of at least POLL_S before a verdict, not an instant kill."""
    now = [0.0]
    monkeypatch.setattr(progress, "_now", lambda: now[0])
    clock = progress.Clock(LIMIT)
    now[0] = 3.0
    clock.watch(lambda: 0.0)
    assert clock.look() is None
    now[0] = 3.0 + progress.POLL_S
    assert clock.look().startswith("it was not computing")


def test_the_cpu_time_of_a_process_counts_its_descendants():
    """A call waiting on a child (a compiler) computes through it: a process's CPU time counts its
    live descendants (here a grandchild that burned 0.6 s and waits)."""
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc here: calls are judged by the limit alone")
    burner = ("import time\ne = time.process_time() + 0.6\nwhile time.process_time() < e: pass\n"
              "print('burned', flush=True)\ntime.sleep(60)")
    parent = ("import subprocess, sys, time\n"
              f"g = subprocess.Popen([sys.executable, '-c', {burner!r}], stdout=subprocess.PIPE)\n"
              "g.stdout.readline()\nprint('ready', flush=True)\ntime.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert child.stdout.readline().strip() == b"ready"
        assert 0.6 <= progress.process_cpu(child.pid) < 5
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert progress.process_cpu(child.pid) is None  # (no such process)


# ---- calls into a target, in a worker and in-process ----------------------------------------

def test_a_call_that_computes_past_the_limit_passes_as_slow(tgt, capsys):
    with pytest.warns(progress.SlowCall, match=r"burn\(1.5\) took .* over the per-call limit of 0.5 s "
                                               r"\(--impl-timeout\): passed as slow, not failed"):
        assert runner.impl(tgt, "burn")(1.5) > 0
    assert "[harness: slow call] burn(1.5)" in capsys.readouterr().err
    assert torch.equal(runner.impl(tgt, "double")(torch.ones(1)), torch.full((1,), 2.0))  # (the same worker)


def test_a_call_that_sleeps_past_the_limit_hangs_at_the_limit(tgt):
    start = time.monotonic()
    with pytest.raises(guard.ImplementationError, match=r"did not return within the per-call limit of 0.5 s "
                                                        r"\(--impl-timeout\)(; its worker process was killed)?: "
                                                        r"it (was not|computed past the limit, then stopped) "
                                                        r"computing"):
        runner.impl(tgt, "sleeps")(1.5)
    assert time.monotonic() - start < 1.5  # (stopped before it would have returned)
    with pytest.raises(guard.ImplementationError, match="not called again"):
        runner.impl(tgt, "sleeps")(0)


def test_a_call_that_computes_forever_ends_at_its_cpu_ceiling(tgt):
    start = time.monotonic()
    with pytest.raises(guard.ImplementationError, match=r"did not return within the per-call limit of 0.5 s .*"
                                                        r"it kept computing until its CPU time reached the "
                                                        r"ceiling of 2.5 s \(5 x the limit\)"):
        runner.impl(tgt, "spins")()
    assert time.monotonic() - start < LIMIT + progress.CEILING * LIMIT / progress.MIN_SHARE  # (the bound)


def test_a_first_call_that_imports_a_slow_library_gets_the_import_allowance(tmp_path):
    """In a worker, a name's first call that imports modules may compute up to --import-timeout
    (here 3 CPU seconds of imports, past the 2.5 s ceiling of other calls); the same work in a later
    call of that name is stopped at the ceiling."""
    for name in ("slow_library", "other_slow_library"):
        (tmp_path / f"{name}.py").write_text(SLOW_IMPORT.format(seconds=3.0))
    for tgt in source_target(tmp_path, "slow_target", SOURCE, "process", timeout=LIMIT):
        assert tgt.worker.import_timeout >= 60
        with pytest.warns(progress.SlowCall, match="passed as slow"):
            assert runner.impl(tgt, "uses")(str(tmp_path), "slow_library") == "slow_library"
        with pytest.raises(guard.ImplementationError, match=r"ceiling of 2.5 s \(5 x the limit\)"):
            runner.impl(tgt, "uses")(str(tmp_path), "other_slow_library")


def test_a_first_call_whose_import_never_ends_ends_at_the_import_allowance(tmp_path):
    (tmp_path / "endless_library.py").write_text(SLOW_IMPORT.format(seconds=None))
    from harness.boundary.loader import load_target
    (tmp_path / "slow_target.py").write_text(SOURCE)
    tgt = load_target(str(tmp_path / "slow_target.py"), isolation="process", timeout=LIMIT, import_timeout=4)
    try:
        with pytest.raises(guard.ImplementationError, match=r"ceiling of 4 s \(the import allowance"):
            runner.impl(tgt, "uses")(str(tmp_path), "endless_library")
    finally:
        tgt.close()
