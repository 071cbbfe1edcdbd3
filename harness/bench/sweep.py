"""Interleaved CPU timing of one case over all its sizes (what makes a scaling fit robust).

Timing the sizes one after another lets any drift of the machine -- another process
starting, clocks changing -- land on a range of n and bend the fitted exponent.
So on CPU a case's sweep is timed in rounds: each round takes one block (the
blocked-timer sample of ``harness.bench.timer``) of every size still sampling,
alternating the order of sizes from round to round. Drift is then spread over all
sizes instead of correlating with n.

Per size, in ascending n: one validation call (output checked, peak memory
measured), then calibration (calls per block so a block takes >= ``min_block_s``; the
calibration block is not a sample). A size whose calibrated call time, extrapolated
as n^2 to the next size, exceeds ``max_call_s`` ends the sweep there: the larger sizes
are skipped with the reason. Then rounds run until every size has its samples, with
the same stopping rule as ``time_cpu``: at least 3 blocks, and ``min_blocks`` blocks and
``min_run_s`` seconds unless ``max_run_s`` is spent.

Enough repeats where the spread needs them (``spread_repeats``): a size whose repeats so far
spread too wide for the gate to detect its stated slowdown (``harness.verdicts.gate_rule``: twice the
relative IQR over ``GATE_SLOWDOWN``) keeps taking blocks, up to the profile's
``spread_max_blocks``, while the run's ``spread_budget_s`` lasts (shared by every sweep of the
run through ``budget``). The IQR is robust to a quarter of the blocks on each side, so a burst
of another job's load that blew up 2 of 5 blocks is outvoted by the quiet blocks after it; a
point that stays noisy is recorded as it is, and the gate calls it undecided.

A size whose validation raises (error, NaN, out of memory) keeps its exception, which
is re-raised when the runner asks for that point, so it is recorded with its status.

With a ``deadline`` (the run's time budget, ``harness bench --time-budget-s``), no size is
validated after it (skipped, the reason starts with "time budget") and the rounds stop
once every live size has a sample.

Each size is handed to ``on_done`` the moment it is settled -- at once when its validation
fails or it is skipped, else when its last sample is taken -- and the scaling suite writes its
row there and then. A kill during the rounds loses the sizes of this one case still sampling
(they are measured together: that is what interleaving means), never a finished size or
another case; ``--resume`` then re-sweeps only the missing sizes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from harness.bench.on_target import PointCall
from harness.bench.timer import Timing, calibrate, summarize
from harness.verdicts.gate_rule import decides, detectable
from harness.boundary.handles import is_remote
from harness.verdicts.runfolder import SIZE_CAP_REASON


def _times_itself(call) -> bool:
    """A ``PointCall``, here or in the target's worker: it calibrates and times its own blocks
    (in the worker, so no block includes a transfer between processes)."""
    return isinstance(call, PointCall) or is_remote(call)


@dataclass
class Slot:
    """One size of the sweep."""
    n: int
    prepare: Callable[[], tuple[Callable[[], object], dict]]  # -> (call, validation metrics)
    call: Callable[[], object] | None = None
    metrics: dict = field(default_factory=dict)
    error: BaseException | None = None
    number: int = 1
    samples: list[float] = field(default_factory=list)
    spent: float = 0.0

    def block(self, clock=time.perf_counter) -> float:
        if _times_itself(self.call):
            return self.call.block(self.number)
        t0 = clock()
        for _ in range(self.number):
            self.call()
        return clock() - t0


def _calibrate(slot: Slot, min_block_s: float) -> float:
    """Set ``slot.number`` (``harness.bench.timer.calibrate``); returns the per-call seconds."""
    if _times_itself(slot.call):
        slot.number, elapsed = slot.call.calibrate(min_block_s, True)
    else:
        slot.number, elapsed = calibrate(slot.call, min_block_s, recheck=True)
    return elapsed / slot.number


def wants_more(slot: Slot, min_blocks: int, min_run_s: float, max_run_s: float) -> bool:
    k = len(slot.samples)
    return k < min(3, min_blocks) or ((k < min_blocks or slot.spent < min_run_s) and slot.spent < max_run_s)


def too_noisy(samples: list[float], device: str = "cpu") -> bool:
    """Whether ``samples`` spread too wide for the gate to detect its stated slowdown."""
    if len(samples) < 3:
        return False
    t = summarize(samples, 1, "")
    return t.median_s > 0 and not decides(detectable(t.iqr_s / t.median_s, device), device)


def spread_repeats(slot: Slot, prof, budget: dict | None) -> bool:
    """A settled size takes another block because it is too noisy (module doc)."""
    return (budget is not None and budget.get("left_s", 0.0) > 0
            and len(slot.samples) < getattr(prof, "spread_max_blocks", 0) and too_noisy(slot.samples))


def run_sweep(slots: list[Slot], prof, skip_reason: Callable[[str], BaseException], *,
              note: Callable[[str], None] = lambda text: None, deadline: float | None = None,
              clock: Callable[[], float] = time.perf_counter,
              on_done: Callable[[Slot, Timing | BaseException], None] = lambda slot, result: None,
              budget: dict | None = None) -> dict[int, Timing | BaseException]:
    """Validate, calibrate and time ``slots`` (ascending n); returns n -> Timing or exception,
    and hands each slot to ``on_done`` as soon as its result is final (module doc). ``budget``:
    ``{"left_s": seconds}``, the run's time for more repeats of noisy sizes, spent here."""
    from harness.bench.points import BUDGET_REASON, release

    out: dict[int, Timing | BaseException] = {}

    def late() -> bool:
        return deadline is not None and clock() > deadline

    def finish(slot: Slot) -> None:
        if slot.error is not None:
            out[slot.n] = slot.error
        else:
            t = summarize(slot.samples, slot.number, "cpu_blocked_interleaved")
            out[slot.n] = t
        slot.call = None  # free the inputs
        on_done(slot, out[slot.n])

    live: list[Slot] = []
    stop: str | None = None
    for i, slot in enumerate(slots):
        if stop is None and late():
            stop = f"{BUDGET_REASON}: the run's time budget was spent before this size could start"
        if stop is not None:
            slot.error = skip_reason(stop)
            finish(slot)
            continue
        note(f"n={slot.n} validate")
        try:
            slot.call, slot.metrics = slot.prepare()
            note(f"n={slot.n} calibrate")
            per_call = _calibrate(slot, prof.min_block_s)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - recorded by the runner for this point
            release(exc)  # kept until the runner asks: without the failed call's tensors
            slot.error, slot.call = exc, None
            finish(slot)
            continue
        live.append(slot)
        nxt = slots[i + 1].n if i + 1 < len(slots) else None
        if nxt is not None and per_call * (nxt / slot.n) ** 2 > prof.max_call_s:
            stop = (f"{SIZE_CAP_REASON}: predicted {per_call * (nxt / slot.n) ** 2:.2f} s per call at "
                    f"n={nxt} (n^2 from {per_call:.2f} s at n={slot.n}), over the profile's per-call budget of "
                    f"{prof.max_call_s:g} s; this and larger sizes not measured")
    rnd = 0
    while True:
        todo = [s for s in live if wants_more(s, prof.min_blocks, prof.min_run_s, prof.max_run_s)]
        extra = [s for s in live if s not in todo and not late() and spread_repeats(s, prof, budget)]
        todo += extra
        for slot in [s for s in live if s not in todo]:  # settled: recorded now
            live.remove(slot)
            finish(slot)
        if not todo or (late() and all(s.samples for s in live)):
            break
        note(f"round {rnd + 1}: {len(todo)} sizes")
        for slot in (todo if rnd % 2 == 0 else todo[::-1]):
            elapsed = slot.block()
            slot.spent += elapsed
            slot.samples.append(elapsed / slot.number)
            if slot in extra:
                budget["left_s"] -= elapsed
        rnd += 1
    for slot in live:  # the time budget ran out: each has at least one sample
        finish(slot)
    return {slot.n: out[slot.n] for slot in slots}
