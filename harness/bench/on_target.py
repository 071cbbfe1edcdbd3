"""Benchmark work that runs next to the target's code, and so inside its worker process.

With ``--isolation process`` (the default) the target is imported only in its worker
(``harness.isolation``), and its components reach the harness as handles. A benchmark must
not time or measure across that boundary: each crossing pays a transfer, the call allocates
in the other process, and autograd does not cross it. So the measurement itself runs where
the target runs (``harness.runner.on_target``):

* ``PointCall`` is one call of a component on fixed inputs. It is built in the worker by
  ``point_call`` and validates (peak memory), calibrates and times blocks of calls *there*,
  on that process's clock and allocator; the parent only receives the numbers.
* the other suites' target work -- a receptive-field gradient profile, a KV-cache decode
  run, a fine-tune seed -- is one module-level function each, run in the worker whole.

Every request to the worker has the target's per-call wall-clock limit (``harness bench
--impl-timeout``): a request that passes it, crashes or kills the worker fails that one
point with the cause ("the worker process died with SIGSEGV during block(...)"); the worker
is restarted for the next point. With ``--isolation none``, and for the harness's own
comparison kernels, the same objects run in this process, so both are measured the same way.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from harness.bench.memory import peak_memory_repeated
from harness.bench.timer import Timing, calibrate, time_fn


class PointCall:
    """``fn(*args, **kwargs)`` on fixed inputs; every method runs under inference mode."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict | None = None):
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs or {})

    def __call__(self):
        return self.fn(*self.args, **self.kwargs)

    def validate(self, device: str, repeats: int = 1, budget_s: float | None = None) -> tuple[Any, dict]:
        """One call's output and the peak-memory metrics of up to ``repeats`` calls."""
        with torch.inference_mode():
            return peak_memory_repeated(self, device, repeats, budget_s)

    def calibrate(self, min_block_s: float, recheck: bool = True) -> tuple[int, float]:
        """(calls per block, the last block's seconds): ``harness.bench.timer.calibrate``."""
        with torch.inference_mode():
            return calibrate(self, min_block_s, recheck=recheck)

    def block(self, number: int) -> float:
        """Seconds for ``number`` calls back to back (one sample of the blocked CPU timer)."""
        with torch.inference_mode():
            t0 = time.perf_counter()
            for _ in range(number):
                self()
            return time.perf_counter() - t0

    def timing(self, device: str, **kw) -> dict:
        """``harness.bench.timer.time_fn`` of this call (CUDA events on a GPU), as a dict."""
        with torch.inference_mode():
            return time_fn(self, device, **kw).to_dict()


def point_call(fn: Callable, make_inputs: Callable[[dict, str], tuple], p: dict, device: str,
               extra: tuple = (), kwargs: dict | None = None) -> PointCall:
    """``fn(*make_inputs(p, device), *extra, **kwargs)`` as a ``PointCall``: run it through
    ``on_target`` so that the inputs are made, and the calls timed, in the target's process."""
    return PointCall(fn, tuple(make_inputs(p, device)) + tuple(extra), kwargs)


def timing_of(call, device: str, **kw) -> Timing:
    """``call.timing(...)`` back as a ``Timing`` (a dict crosses the process boundary)."""
    return Timing(**call.timing(device, **kw))


def prepare_process(device: str, keep_memory: bool, suites: list[str] = ()) -> str:
    """The run's process-wide settings in the process this runs in (the target's worker):
    the current CUDA device, and glibc keeping freed memory as ``harness bench`` does here
    (``harness.bench.memory.keep_freed_memory``); the suites' modules are imported here, so
    no point's limit pays for it. Returns the allocator mode."""
    from harness.bench import suites as registry
    from harness.bench.memory import keep_freed_memory
    for name in suites:
        registry.module(name)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    return keep_freed_memory() if keep_memory else "default"
