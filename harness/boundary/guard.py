"""The call rules: what every call into a target's code is held to, in this process or in its worker.

This one module states them, and both sides apply them: ``call`` here (``--isolation none``, and
any callable a suite passes), ``harness.boundary.worker`` next to the target's objects and
``harness.boundary.isolation`` on the harness's side of the pipe:
- a function that once ran past the per-call limit is not called again (``CallLimit``);
- an exception becomes an ``ImplementationError`` that names the function and the input shapes,
  so Hypothesis shrinks it like any other failure;
- a call that runs past the per-call time limit is interrupted (SIGALRM in the main thread;
  elsewhere it is detected when it returns; a worker's whole process group is killed), unless it
  keeps computing: a busy machine's slow call is reported slow, not failed, up to a ceiling of CPU
  time (``harness.boundary.progress`` judges it; a name's first call that imports gets the import allowance);
- tensors passed in are fingerprinted and must come back unmodified (except the arguments
  ``MUTABLE`` names: the KV caches ``attention_with_kvcache`` writes into, which may not be
  resized); an output of a ``NO_ALIAS`` name must not share an input's memory (``Inputs``);
- ``expect_tensor`` checks the returned shape, dtype and device.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness.basics import options
from harness.spec import protocol
from harness.boundary import progress
from harness.boundary.handles import Remote, call_remote

#: seconds one call into the target may take (``--impl-timeout``), unless the target is given another
DEFAULT_TIMEOUT = 20.0


@dataclass
class CallLimit:
    """One target's per-call limit (``seconds``, from ``--impl-timeout``) and the functions that
    already ran past it, which are not called again (a hanging target would otherwise cost the
    full limit for every example Hypothesis tries). Owned by the ``Target`` (``target.limit``):
    each session, and each ``harness repro`` / ``harness bench``, has its own."""

    seconds: float = DEFAULT_TIMEOUT
    #: key (a function's id here, a name in a worker) -> (what keeps the key valid: the function,
    #: kept alive so its id stays unique; the arguments it hung with, for the message)
    hung: dict[Any, tuple[Any, str]] = field(default_factory=dict)
    #: the CPU seconds a name's first call may spend when it imports modules (``harness.boundary.progress``),
    #: in-process: the default import limit (a worker's first calls get its ``--import-timeout``)
    first_allowance: float = options.IMPORT_TIMEOUT_S
    #: the names called so far (in the current worker: cleared when one starts)
    called: set = field(default_factory=set)
    #: wall seconds spent in this target's calls (a worker's round trip included), for the
    #: per-property timing of the conformance report (``harness.plugin``: the difference per test)
    spent: float = 0.0

    @contextlib.contextmanager
    def timed(self):
        """Count the wall time of the block as the target's (``spent``): a call here, a worker's round trip."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.spent += time.perf_counter() - start

    def first_call(self, name: str) -> bool:
        """Whether this is ``name``'s first call (here, or in the current worker); noted."""
        if name in self.called:
            return False
        self.called.add(name)
        return True

    def refuse_if_hung(self, key: Any, name: str) -> None:
        """Raise ``ImplementationError`` when the function ``key`` already ran past the limit."""
        if key in self.hung:
            raise ImplementationError(
                f"{name} previously did not return within the per-call limit of {self.seconds:g} s "
                f"(--impl-timeout) when called with ({self.hung[key][1]}); not called again")

    def record_hung(self, key: Any, keep: Any, shown: str) -> None:
        """The function ``key`` (``keep`` keeps its key valid) ran past the limit with ``shown``."""
        self.hung[key] = (keep, shown)

    def over_limit(self, what: str, why: str = "") -> str:
        """The message of a call ``what`` that did not return within the limit (``why``: how
        ``harness.boundary.progress`` judged it)."""
        return f"{what} did not return within the per-call limit of {self.seconds:g} s (--impl-timeout)" + \
            (f": {why}" if why else "")


class ImplementationError(AssertionError):
    """The target raised, hung, mutated its input or returned the wrong kind of thing."""


class CallTimeout(Exception):
    pass


def describe_args(args: tuple, kwargs: dict) -> str:
    """The call's arguments for a message: tensors by shape and dtype (inside lists and tuples too:
    printing a tensor's values costs more than most calls, and says less), long sequences by length."""
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"Tensor{tuple(v.shape)}:{str(v.dtype).replace('torch.', '')}"
        if isinstance(v, (list, tuple)):
            if len(v) > 4:
                return f"{type(v).__name__}(len={len(v)})"
            inner = ", ".join(one(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        return repr(v)
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


class Described:
    """``name(arguments)`` for a message, described only when a message is made (most calls make
    none: describing every call's arguments up front was a measurable share of a conformance run)."""

    __slots__ = ("name", "args", "kwargs", "_text")

    def __init__(self, name: str, args: tuple, kwargs: dict):
        self.name, self.args, self.kwargs, self._text = name, args, kwargs, None

    def arguments(self) -> str:
        if self._text is None:
            self._text = describe_args(self.args, self.kwargs)
        return self._text

    def __str__(self) -> str:
        return f"{self.name}({self.arguments()})"

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731 - f-strings format it


#: protocol names whose output must be new memory, never a view of an input (derived from the
#: records' ``new_memory``): an attention output that aliases its query is overwritten by (or
#: overwrites) the caller's next in-place op on either
NO_ALIAS = protocol.NO_ALIAS

#: the arguments (by position and by keyword) a protocol name may modify in place (derived from the
#: records' ``writes``); every other input must come back unmodified. In a worker they are sent back
#: after the call and copied into the caller's tensors (``harness.boundary.isolation``), so a suite reads the
#: caches the same either way.
MUTABLE = protocol.MUTABLE


def argument_label(key: int | str) -> str:
    """How messages name a call's argument: by position, or by keyword."""
    return f"argument {key}" if isinstance(key, int) else f"argument {key!r}"


def aliased_argument(result: Any, args: tuple, kwargs: dict) -> str | None:
    """The argument whose memory the tensor ``result`` shares, or None."""
    if not isinstance(result, torch.Tensor) or result.numel() == 0 or result.device.type == "meta":
        return None
    ptr = result.untyped_storage().data_ptr()
    for key, a in [*enumerate(args), *kwargs.items()]:
        if isinstance(a, torch.Tensor) and a.numel() and a.device == result.device \
                and a.untyped_storage().data_ptr() == ptr:
            return argument_label(key)
    return None


def writes_into(name: str) -> bool:
    """Whether ``name`` may write into some of its arguments (``MUTABLE``): a worker then sends
    them back after the call, for the harness to copy into the caller's tensors."""
    return bool(MUTABLE.get(name))


class Inputs:
    """A call's inputs as they were before it (``name``'s rules: ``MUTABLE``, ``NO_ALIAS``), to
    judge after it: ``violation(result)`` says how the call broke a rule, or None. The same judge
    runs here and in a worker, so both name a broken rule in the same words."""

    def __init__(self, name: str, args: tuple, kwargs: dict):
        mutable = MUTABLE.get(name, frozenset())
        self.args, self.kwargs, self.no_alias = args, kwargs, name in NO_ALIAS
        self.mutable = mutable
        self.snapshots = [(k, v.detach().clone()) for k, v in [*enumerate(args), *kwargs.items()]
                          if k not in mutable and isinstance(v, torch.Tensor)]
        self.shapes = {k: tuple(v.shape) for k, v in [*enumerate(args), *kwargs.items()]
                       if k in mutable and isinstance(v, torch.Tensor)}

    def _now(self, key: int | str) -> Any:
        return self.args[key] if isinstance(key, int) else self.kwargs[key]

    def violation(self, result: Any) -> str | None:
        """What the call did that its rules forbid (the message after ``name(args)``), or None:
        it modified an input in place, resized an argument it may write into, or returned a
        tensor that shares an input's memory."""
        for key, snap in self.snapshots:
            now = self._now(key)
            if now.shape != snap.shape or not torch.equal(now.detach(), snap):
                return f"modified its input in place ({argument_label(key)})"
        for key, shape in self.shapes.items():
            now = tuple(self._now(key).shape)
            if now != shape:
                return (f"resized its {argument_label(key)} from {shape} to {now}: "
                        f"it may only write into it")
        alias = aliased_argument(result, self.args, self.kwargs) if self.no_alias else None
        if alias:
            return f"returned a tensor that shares the memory of its {alias}: the output must be new memory"
        return None

    def written(self) -> list[tuple[int | str, torch.Tensor]]:
        """The arguments the call may write into (``MUTABLE``), as they are now."""
        return [(key, self._now(key).detach()) for key in self.shapes]


def write_back(reply, args: tuple, kwargs: dict):
    """The result of a call to a name that may write into its arguments (``guard.MUTABLE``):
    the arguments' contents after the call (the worker checked they kept their shapes), sent
    back by the worker, are copied into the caller's tensors, so the caller sees the writes as
    it would in-process."""
    result, updated = reply
    for key, after in updated:
        mine = args[key] if isinstance(key, int) else kwargs[key]
        with torch.no_grad():
            mine.copy_(after.to(mine.device))
    return result


def call(limit: CallLimit, fn: Callable, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` under the call rules and the target's ``limit`` (``target.limit``);
    see the module docstring. A handle into a target's worker (``harness.boundary.handles.Remote``) is
    called there, under the same rules and its worker's limit."""
    with limit.timed():
        if isinstance(fn, Remote):
            return call_remote(fn, name, args, kwargs)
        return _call_here(limit, fn, name, *args, **kwargs)


def _call_here(limit: CallLimit, fn: Callable, name: str, *args: Any, **kwargs: Any) -> Any:
    """``call`` of a function in this process."""
    limit.refuse_if_hung(id(fn), name)
    seconds = limit.seconds
    inputs = Inputs(name, args, kwargs)
    call_text = Described(name, args, kwargs)
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    clock = progress.Clock(seconds, allowance=limit.first_allowance if limit.first_call(name) else 0.0,
                           imports=lambda: len(sys.modules))
    clock.watch(time.process_time)  # (this process's CPU time: the call runs here)
    old_handler = None
    armed = [use_alarm]  # the alarm is ours until ``disarm``: a late handler neither raises nor re-arms
    restored = [not use_alarm]

    def look(signum, frame):  # noqa: ARG001 - SIGALRM: before the limit, at it, then every POLL_S
        if not armed[0]:
            return  # (delivered while the call was being disarmed)
        why = clock.look()
        if why is not None:
            armed[0] = False
            raise CallTimeout(why)
        signal.setitimer(signal.ITIMER_REAL, clock.next_look())

    def disarm() -> None:
        # Idempotent. The flag goes first: a handler pending at this point returns at once instead
        # of re-arming the timer, which would fire after SIGALRM's default action is restored and
        # kill the process (pytest's, or an xdist worker: "node down").
        armed[0] = False
        if not restored[0]:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            restored[0] = True

    if use_alarm:
        old_handler = signal.signal(signal.SIGALRM, look)
        signal.setitimer(signal.ITIMER_REAL, clock.next_look())
    try:
        try:
            result = fn(*args, **kwargs)
        finally:
            disarm()
    except CallTimeout as stop:
        disarm()  # (again: the timeout may have come in the finally, before it was done)
        limit.record_hung(id(fn), fn, call_text.arguments())
        raise ImplementationError(limit.over_limit(str(call_text), stop.args[0])) from None
    except ImplementationError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit() in a target must not end the session
        raise ImplementationError(
            f"{call_text} raised {type(exc).__name__}: {exc}") from exc
    elapsed = clock.elapsed()
    if elapsed > seconds:  # (judged when it returns where no alarm could: not the main thread)
        why = None if clock.slow else clock.look()
        if why is not None:
            raise ImplementationError(
                f"{call_text} took {elapsed:.1f} s, over the per-call limit of {seconds:g} s"
                + (f": {why}" if why else ""))
        clock.report_slow(str(call_text), "--impl-timeout")
    broken = inputs.violation(result)
    if broken:
        raise ImplementationError(f"{call_text} {broken}")
    return result


def expect_tensor(out: Any, name: str, shape: tuple[int, ...], dtype: torch.dtype,
                  device: torch.device) -> torch.Tensor:
    """Raise ``ImplementationError`` unless ``out`` is a tensor of this shape/dtype/device."""
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        raise ImplementationError(
            f"{name} returned a tuple of {len(out)}; the protocol returns a single tensor")
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"{name} returned {type(out).__name__}, expected a Tensor")
    if tuple(out.shape) != tuple(shape):
        raise ImplementationError(
            f"{name} returned shape {tuple(out.shape)}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise ImplementationError(f"{name} returned dtype {out.dtype}, expected {dtype}")
    if out.device.type != torch.device(device).type:
        raise ImplementationError(f"{name} returned a tensor on {out.device}, expected {device}")
    return out
