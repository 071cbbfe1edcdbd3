"""Benchmark work that runs next to the target's code, and so inside its worker process.

With ``--isolation process`` (the default) the target is imported only in its worker
(``harness.boundary.isolation``), and its components reach the harness as handles. A benchmark must
not time or measure across that boundary: each crossing pays a transfer, the call allocates
in the other process, and autograd does not cross it. So the measurement itself runs where
the target runs (``harness.runner.on_target``):

* ``PointCall`` is one call of a component on fixed inputs -- its forward, its backward or
  both (``pass_``). It is built in the worker by ``point_call`` and validates (peak memory),
  calibrates and times blocks of calls *there*, on that process's clock and allocator; the
  parent only receives the numbers (and, for a backward pass, a verdict on the gradients:
  autograd does not cross processes, and the gradients need not).
* the other suites' target work -- a receptive-field gradient profile, a KV-cache decode
  run, a fine-tune seed -- is one module-level function each, run in the worker whole.

Every request to the worker has the target's per-call wall-clock limit (``harness bench
--impl-timeout``): a request that passes it, crashes or kills the worker fails that one
point with the cause ("the worker process died with SIGSEGV during block(...)"); the worker
is restarted for the next point. With ``--isolation none``, and for the harness's own
comparison kernels, the same objects run in this process, so both are measured the same way.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import torch

from harness.bench.memory import peak_memory_repeated
from harness.bench.timer import Timing, calibrate, time_fn
from harness.verdicts.runfolder import PASSES


class PointCall:
    """One pass of ``fn(*args, **kwargs)`` on fixed inputs (``pass_``, ``harness.verdicts.runfolder.PASSES``):

    - "fwd": the call, every method under inference mode;
    - "bwd": the backward alone. ``prepare_backward`` runs the forward once, untimed, with the
      floating inputs as leaves that require grad (and ``params``, e.g. a module's weights), and
      keeps its graph; each call is then ``torch.autograd.grad(out, leaves, g, retain_graph=True)``
      with a fixed seeded upstream gradient ``g`` (output-shaped), so only the backward is timed,
      and nothing accumulates from call to call;
    - "fwd_bwd": the forward and that backward together, each call.
    """

    def __init__(self, fn: Callable, args: tuple, kwargs: dict | None = None, pass_: str = "fwd",
                 params: tuple = ()):
        if pass_ not in PASSES:
            raise ValueError(f"pass must be one of {PASSES}, got {pass_!r}")
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs or {})
        self.pass_, self.params = pass_, tuple(params)
        self._out = self._grad = None
        self._wrt: tuple = ()

    def _mode(self):
        """Inference mode for the forward; autograd on (inference mode off) for the others."""
        if self.pass_ == "fwd":
            return torch.inference_mode()
        return _autograd_on()

    def __call__(self):
        if self.pass_ == "fwd":
            return self.fn(*self.args, **self.kwargs)
        if self._grad is None:
            raise RuntimeError("PointCall: prepare_backward() must run before a backward pass is called")
        if self.pass_ == "bwd":
            return torch.autograd.grad(self._out, self._wrt, self._grad, retain_graph=True, allow_unused=True)
        out = self.fn(*self.args, **self.kwargs)
        return torch.autograd.grad(out, self._wrt, self._grad, allow_unused=True)

    def prepare_backward(self, seed: int = 1) -> str | None:
        """Make the leaves, run the forward once (untimed) and one backward, and keep what the
        pass needs (module doc). Returns None, or why there is no backward ("no backward: the
        output has no grad_fn", "... its backward raised NotImplementedError: ..."); any other
        exception of the backward is raised (the point is an error, out of memory an oom)."""
        from harness.boundary.target_ops import backward_missing, no_grad_fn
        if self.pass_ == "fwd":
            return None
        with _autograd_on():
            self.args = tuple(a.detach().clone().requires_grad_(True)
                              if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                              for a in self.args)
            self._wrt = tuple(a for a in self.args if isinstance(a, torch.Tensor) and a.requires_grad) + \
                tuple(p for p in self.params if isinstance(p, torch.Tensor) and p.requires_grad)
            out = self.fn(*self.args, **self.kwargs)
            why = no_grad_fn(out)
            if why is not None:
                return f"no backward: {why}"
            gen = torch.Generator(device=out.device).manual_seed(seed)
            grad = torch.randn(out.shape, generator=gen, device=out.device).to(out.dtype)
            try:
                torch.autograd.grad(out, self._wrt, grad, retain_graph=self.pass_ == "bwd", allow_unused=True)
            except (NotImplementedError, RuntimeError) as exc:
                why = backward_missing(exc)
                if why is None:
                    raise
                return f"no backward: {why}"
            self._grad = grad
            self._out = out if self.pass_ == "bwd" else None
        return None

    def result_problem(self, result) -> str | None:
        """For a backward pass: why its gradients are not usable (a non-finite element, a shape
        other than its input's), or None; checked where they live, so they never cross."""
        for i, (leaf, g) in enumerate(zip(self._wrt, result)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(leaf.shape):
                return f"shape: the gradient of input {i} has shape {tuple(g.shape)}, the input {tuple(leaf.shape)}"
            if g.is_floating_point():
                bad = (~torch.isfinite(g)).sum().item()
                if bad:
                    kind = "NaN" if torch.isnan(g).any().item() else "inf"
                    return f"nan: the gradient of input {i} has {bad} non-finite ({kind}) of {g.numel()} elements"
        return None

    def validate(self, device: str, repeats: int = 1, budget_s: float | None = None) -> tuple[Any, dict]:
        """One call's output and the peak-memory metrics of up to ``repeats`` calls. For a backward
        pass the output is ``result_problem`` of its gradients (None: fine), not the gradients."""
        with self._mode():
            out, mem = peak_memory_repeated(self, device, repeats, budget_s)
            if self.pass_ != "fwd":
                out = self.result_problem(out)
            return out, mem

    def calibrate(self, min_block_s: float, recheck: bool = True) -> tuple[int, float]:
        """(calls per block, the last block's seconds): ``harness.bench.timer.calibrate``."""
        with self._mode():
            return calibrate(self, min_block_s, recheck=recheck)

    def block(self, number: int) -> float:
        """Seconds for ``number`` calls back to back (one sample of the blocked CPU timer)."""
        with self._mode():
            t0 = time.perf_counter()
            for _ in range(number):
                self()
            return time.perf_counter() - t0

    def timing(self, device: str, **kw) -> dict:
        """``harness.bench.timer.time_fn`` of this call (CUDA events on a GPU), as a dict."""
        with self._mode():
            return time_fn(self, device, **kw).to_dict()


@contextlib.contextmanager
def _autograd_on():
    with torch.inference_mode(False), torch.enable_grad():
        yield


def point_call(fn: Callable, make_inputs: Callable[[dict, str], tuple], p: dict, device: str,
               extra: tuple = (), kwargs: dict | None = None, pass_: str = "fwd") -> PointCall:
    """``fn(*make_inputs(p, device), *extra, **kwargs)`` as a ``PointCall`` of ``pass_``: run it
    through ``on_target`` so that the inputs are made, and the calls timed, in the target's process."""
    return PointCall(fn, tuple(make_inputs(p, device)) + tuple(extra), kwargs, pass_)


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
