"""Timing one kernel call: median and IQR, the way torch and triton do it.

CPU -- ``time_cpu`` (torch.utils.benchmark's ``blocked_autorange`` method): the call
is repeated in blocks of ``number`` calls, ``number`` grown until one block takes at
least ``min_block_s`` (so the clock's resolution and the loop's overhead vanish);
blocks are run until ``min_run_s`` has passed and at least ``min_blocks`` blocks
exist, or ``max_run_s`` is spent (but at least 3 blocks, unless the calibration block
alone took ``max_run_s``; the calibration block itself is not a sample). Each block gives one sample, block time / number;
we report the median, the IQR (q75 - q25), the minimum and the number of blocks.

CUDA -- ``time_cuda`` (triton.testing.do_bench's method): warm-up calls, then for
each repetition a 256 MB buffer is overwritten (flushing the L2 cache so every
repetition starts cold, as in a real model), then CUDA events are recorded around the
call; one synchronize at the end, then ``elapsed_time`` of every pair. Events time
the GPU stream, so an asynchronous launch is never mistaken for the kernel's time;
nothing is timed with the host clock without a synchronize. A call slower than
``rep_ms / 5`` is its own estimate and ``max_run_s`` caps its repetitions (>= 3).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


#: a row stores its repeats (``time_samples_s``) when there are at most this many
MAX_STORED_SAMPLES = 256


@dataclass
class Timing:
    median_s: float
    iqr_s: float
    min_s: float
    repeats: int          # number of samples (blocks on CPU, repetitions on CUDA)
    number: int = 1       # calls per sample
    method: str = "cpu_blocked"
    samples: list | None = None

    def metrics(self) -> dict:
        """The results-schema metric fields."""
        out = {"time_s": self.median_s, "time_iqr_s": self.iqr_s, "time_min_s": self.min_s,
               "repeats": self.repeats, "calls_per_repeat": self.number, "timer": self.method}
        if self.samples and len(self.samples) <= MAX_STORED_SAMPLES:  # the gate's rank test reads them
            out["time_samples_s"] = [float(x) for x in self.samples]
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples: list[float], number: int, method: str) -> Timing:
    """Median, IQR (inclusive quartiles) and min of per-call samples."""
    if not samples:
        raise ValueError("no timing samples")
    s = sorted(samples)
    if len(s) >= 2:
        q1, _, q3 = statistics.quantiles(s, n=4, method="inclusive")
    else:
        q1 = q3 = s[0]
    return Timing(statistics.median(s), q3 - q1, s[0], len(s), number, method, list(samples))


def calibrate(fn: Callable[[], object], min_block_s: float = 0.02, recheck: bool = True,
              clock: Callable[[], float] = time.perf_counter) -> tuple[int, float]:
    """Calls per block so that a block takes >= ``min_block_s``: (number, last block's seconds).

    With ``recheck`` (no warm-up before), a first block of one call shorter than
    10 x ``min_block_s`` may have been a cold start passing for a long call: calibrate again.
    """
    number = 1
    for _ in range(2 if recheck else 1):
        while True:
            t0 = clock()
            for _ in range(number):
                fn()
            elapsed = clock() - t0
            if elapsed >= min_block_s or number >= 1 << 20:
                break
            number = max(number * 2, int(number * min_block_s / max(elapsed, 1e-9) * 1.2) + 1)
        if number > 1 or elapsed >= 10 * min_block_s:
            break
    return number, elapsed


def time_cpu(fn: Callable[[], object], *, min_block_s: float = 0.02, min_run_s: float = 0.2,
             min_blocks: int = 5, max_run_s: float = 5.0, warmup: int = 1,
             clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Blocked timing on the host clock (see the module docstring)."""
    for _ in range(warmup):
        fn()
    number, elapsed = calibrate(fn, min_block_s, recheck=not warmup, clock=clock)
    if elapsed >= max_run_s:  # one block alone spends the budget: it is the only sample
        return summarize([elapsed / number], number, "cpu_blocked")
    # the calibration block is not a sample (it may include a cold start). Sample until
    # min_blocks and min_run_s are met or max_run_s is spent -- but at least 3 blocks.
    samples: list[float] = []
    spent = 0.0
    while len(samples) < min(3, min_blocks) or \
            ((len(samples) < min_blocks or spent < min_run_s) and spent < max_run_s):
        t0 = clock()
        for _ in range(number):
            fn()
        elapsed = clock() - t0
        spent += elapsed
        samples.append(elapsed / number)
    return summarize(samples, number, "cpu_blocked")


def _cuda_events(n: int) -> list:
    return [torch.cuda.Event(enable_timing=True) for _ in range(n)]


def time_cuda(fn: Callable[[], object], *, warmup_ms: float = 25.0, rep_ms: float = 100.0,
              min_reps: int = 10, max_reps: int = 1000, flush: bool = True,
              device: str | torch.device = "cuda", max_run_s: float | None = None) -> Timing:
    """CUDA-event timing with an L2 flush before each repetition (triton's do_bench).

    As triton: one call, a 5-call estimate (flush included), warm-up calls for
    ``warmup_ms``, then ``rep_ms`` worth of repetitions (at least ``min_reps``, at most
    ``max_reps``). Two differences for slow calls: a first call that alone takes more
    than ``rep_ms / 5`` is the estimate (no 5-call estimate, no further warm-up: it was
    one), and with ``max_run_s`` the repetitions are capped to that many seconds (but
    at least 3), so a 2-second call costs seconds, not a minute. Events are recorded on
    ``device``'s current stream with ``device`` current (``cuda:1`` times cuda:1).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda needs CUDA")
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"time_cuda needs a CUDA device, got {device!r}")
    with torch.cuda.device(dev):
        stream = torch.cuda.current_stream(dev)
        buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=dev) if flush else None
        torch.cuda.synchronize(dev)
        first_start, first_end = _cuda_events(2)
        first_start.record(stream)
        fn()
        first_end.record(stream)
        torch.cuda.synchronize(dev)
        first_ms = first_start.elapsed_time(first_end)
        if first_ms * 5 > rep_ms:  # slow: the first call is the estimate and the warm-up
            est_ms, n_warmup = max(first_ms, 1e-3), 0
        else:  # estimate one call (flush included, as triton does)
            start, end = _cuda_events(2)
            start.record(stream)
            for _ in range(5):
                if buf is not None:
                    buf.zero_()
                fn()
            end.record(stream)
            torch.cuda.synchronize(dev)
            est_ms = max(start.elapsed_time(end) / 5, 1e-3)
            n_warmup = max(1, int(warmup_ms / est_ms))
        n_rep = max(min_reps, min(max_reps, int(rep_ms / est_ms)))
        if max_run_s is not None:
            n_rep = min(n_rep, max(3, int(max_run_s * 1e3 / est_ms)))
        starts, ends = _cuda_events(n_rep), _cuda_events(n_rep)
        for _ in range(n_warmup):
            fn()
        for i in range(n_rep):
            if buf is not None:
                buf.zero_()  # L2 flush, outside the events
            starts[i].record(stream)
            fn()
            ends[i].record(stream)
        torch.cuda.synchronize(dev)
        samples = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]  # elapsed_time is in ms
    return summarize(samples, 1, "cuda_events_l2flush" if flush else "cuda_events")


def time_fn(fn: Callable[[], object], device: str | torch.device = "cpu", **kw) -> Timing:
    """``time_cuda`` on a CUDA device, else ``time_cpu``; ``kw`` go to the chosen one."""
    if torch.device(device).type == "cuda":
        return time_cuda(fn, device=device, **{k: v for k, v in kw.items()
                                               if k in ("warmup_ms", "rep_ms", "min_reps", "max_reps", "flush",
                                                        "max_run_s")})
    return time_cpu(fn, **{k: v for k, v in kw.items()
                           if k in ("min_block_s", "min_run_s", "min_blocks", "max_run_s", "warmup")})


def synchronize(device: str | torch.device = "cpu") -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def reference_timer(fn: Callable[[], object], device: str | torch.device = "cpu",
                    min_run_s: float = 0.2) -> tuple[float | None, str]:
    """The library timer on the same call: (median seconds or None, which / why not).

    CPU: ``torch.utils.benchmark.Timer.blocked_autorange`` (same thread count).
    CUDA: ``triton.testing.do_bench`` (median, L2 flushed), None when triton is absent.
    """
    if torch.device(device).type == "cuda":
        try:
            from triton.testing import do_bench
        except Exception as exc:  # noqa: BLE001 - absent, or broken against this torch/driver
            return None, f"triton.testing.do_bench is not importable ({type(exc).__name__}: {exc})"[:300]
        with torch.cuda.device(torch.device(device)):  # do_bench times the current device
            ms = do_bench(fn, warmup=25, rep=100, return_mode="median")
        return ms / 1e3, "triton.testing.do_bench"
    from torch.utils import benchmark
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_s).median, "torch.utils.benchmark.Timer"
