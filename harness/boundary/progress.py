"""Slow or hung: a call past its per-call limit is judged by the CPU time it consumes.

A busy machine stretches the wall-clock time of a call, not the CPU time the call needs (under
load 10 a name's first call, which imports transformers, ran past the 20 s limit: issue 42). So
the per-call limit L (``--impl-timeout``; ``--import-timeout`` for an import) is applied this way,
by both backends (``harness.boundary.isolation`` reads the worker's CPU time from ``/proc``;
``harness.boundary.guard.call`` in-process reads its own, ``time.process_time``):

- a call that returns within L passes, as always (nothing is measured);
- at L, a call that used less than ``MIN_SHARE`` of one core over the last ``WINDOW_S`` seconds
  (it sleeps, waits on a lock or a blocked signal, polls) HANGS: it is stopped at L, as always;
- a call that computes goes on, and is looked at every ``POLL_S``: it is stopped as soon as it
  stops computing (the same test), or when the CPU time it consumed reaches its CEILING,
  ``CEILING`` x L CPU seconds (a name's first call in a worker that imports modules, a library
  imported on first use: the import allowance, ``--import-timeout``, when that is larger);
- a call that returns after L while computing passes, and is reported SLOW: a ``SlowCall``
  warning (pytest's warnings summary) and a line on stderr (the test's captured output).

The bounds: a call that consumes no CPU ends at L (wall clock); a call that computes forever ends
at its ceiling, counted in its own CPU seconds, which a busy machine does not inflate; in wall-clock
time no call runs past L + ceiling / ``MIN_SHARE`` (it must keep ``MIN_SHARE`` of a core to go on).
The CPU time is the worker process's: all its threads, and its child processes (live ones, and
those it waited for), so a compiler it runs counts. Where ``/proc`` cannot tell (not Linux) every
call is judged by L alone, as before.
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Callable

__all__ = ["Clock", "SlowCall", "process_cpu", "CEILING", "MIN_SHARE", "WINDOW_S", "POLL_S"]

#: the CPU ceiling of a call that keeps computing, in multiples of its limit (CPU seconds)
CEILING = 5
#: the share of one core a call past its limit must keep using to be computing, not hung
MIN_SHARE = 0.05
#: the window (wall-clock seconds) over which that share is measured; /proc counts in 10 ms ticks
WINDOW_S = 1.0
#: how often a call past its limit is looked at, and the shortest window a verdict is given on
POLL_S = 0.25

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_now = time.monotonic  # (the wall clock of ``Clock``; tests give it another)


class SlowCall(UserWarning):
    """A call took longer than its per-call limit while it kept computing: passed, reported slow."""


def process_cpu(pid: int) -> float | None:
    """CPU seconds of process ``pid``: all its threads, the children it waited for, and its live
    descendants (``/proc/<pid>/task/*/children``); None where ``/proc`` cannot tell."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        except (OSError, ValueError, IndexError):
            if p == pid:
                return None
            continue  # (a descendant that ended meanwhile)
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children", "rb") as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                pass  # (a thread that ended; a kernel without the children files: the process alone)
    return total / _TICK


class Clock:
    """One call's watch, started with it: its wall-clock time and the CPU time ``cpu()`` reads.

    ``watch(cpu)`` starts sampling (the worker backend starts it only once the reply did not come
    at once: most calls cost no sample); ``look()`` samples and gives the verdict: None (under the
    limit, or computing) or why the call must be stopped; ``report_slow`` after the reply.
    ``allowance``: the import allowance of a name's first call (CPU seconds), granted when
    ``imports()`` (a count of the modules imported in the call's process) grew during the call."""

    def __init__(self, limit: float, *, allowance: float = 0.0, imports: Callable[[], int] | None = None):
        self.limit = limit
        self.start = _now()
        self.allowance = allowance
        self._imports = imports
        self._imports0 = imports() if imports is not None and allowance else None
        self._cpu: Callable[[], float | None] | None = None
        self.samples: list[tuple[float, float]] = []  # (wall, cpu), the oldest still needed first
        self.slow = False  # it was judged computing past its limit

    def elapsed(self) -> float:
        return _now() - self.start

    def watch(self, cpu: Callable[[], float | None]) -> None:
        """Start sampling ``cpu()`` (CPU seconds of the call's process, or None)."""
        self._cpu = cpu
        self._sample(self.elapsed())

    def _sample(self, now: float) -> float | None:
        used = self._cpu() if self._cpu is not None else None
        if used is None:
            return None
        self.samples.append((now, used))
        while len(self.samples) > 3 and self.samples[2][0] <= now - WINDOW_S:
            del self.samples[1]  # (the first is the call's baseline: kept for the ceiling)
        return used

    def next_look(self) -> float:
        """Seconds until the call should next be sampled: a window before the limit, at it, then
        every ``POLL_S``."""
        now = self.elapsed()
        if now < self.limit - WINDOW_S:
            return self.limit - WINDOW_S - now
        return max(self.limit - now, 0.0) or POLL_S

    def ceiling(self) -> tuple[float, str]:
        """(CPU seconds, how messages name it) of the ceiling of this call."""
        own = CEILING * self.limit
        if self.allowance > own and self._imports0 is not None and self._imports() > self._imports0:
            return self.allowance, "the import allowance of a name's first call that imports modules"
        return own, f"{CEILING} x the limit"

    def look(self) -> str | None:
        """Sample, and judge: None while the call is under its limit or computing, else why it is
        stopped, for the message's end ("...; its worker process was killed: <why>"; "" where the
        CPU time cannot be read)."""
        now = self.elapsed()
        used = self._sample(now)
        if now < self.limit:
            return None
        if used is None or len(self.samples) < 2:
            return "" if used is None else None  # (no CPU time here: judged by the limit alone)
        # the window: from the newest sample at least WINDOW_S old (else the oldest) to now
        then, before = next(((t, c) for t, c in reversed(self.samples[:-1]) if t <= now - WINDOW_S),
                            self.samples[0])
        if now - then < POLL_S:
            return None  # (a window too short to judge: watched late, e.g. a call read later)
        share = (used - before) / (now - then)
        measured = f"{used - before:.2f} s of CPU in its last {now - then:.1f} s"
        if share < MIN_SHARE:
            if self.slow:
                return f"it computed past the limit, then stopped computing at {now:.1f} s ({measured})"
            return f"it was not computing ({measured})"
        ceiling, named = self.ceiling()
        if used - self.samples[0][1] >= ceiling:
            return (f"it kept computing until its CPU time reached the ceiling of {ceiling:g} s ({named}) "
                    f"at {now:.1f} s")
        self.slow = True
        return None

    def note(self, what: str, limit_name: str) -> str | None:
        """The slow-call note of a call that returned past its limit (None: it did not)."""
        now = self.elapsed()
        if now <= self.limit:
            return None
        cpu = f" ({self.samples[-1][1] - self.samples[0][1]:.1f} s of CPU by the last look)" \
            if len(self.samples) > 1 else ""
        return (f"{what} took {now:.1f} s{cpu}, over the per-call limit of {self.limit:g} s ({limit_name}): "
                f"passed as slow, not failed (it kept computing: a busy machine, or a call near its limit)")

    def report_slow(self, what: str, limit_name: str) -> None:
        """Report a call that returned past its limit: a ``SlowCall`` warning and a stderr line."""
        note = self.note(what, limit_name)
        if note is None:
            return
        sys.stderr.write(f"[harness: slow call] {note}\n")
        try:
            warnings.warn(SlowCall(note), stacklevel=2)
        except SlowCall:  # (-W error: the note is not a failure; the stderr line stays)
            pass
