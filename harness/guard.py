"""Call a target's function defensively.

Every call a suite makes into user code goes through ``call``:
- an exception becomes an ``ImplementationError`` that names the function and
  the input shapes, so Hypothesis shrinks it like any other failure;
- a call that runs past the per-call time limit is interrupted (SIGALRM in the
  main thread; elsewhere it is detected when it returns);
- tensors passed in are fingerprinted and must come back unmodified (except the arguments
  ``MUTABLE`` names: the KV caches ``attention_with_kvcache`` writes into);
- ``expect_tensor`` checks the returned shape, dtype and device.
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness import protocol

#: seconds one call into the target may take (``--impl-timeout``), unless the target is given another
DEFAULT_TIMEOUT = 20.0


@dataclass
class CallLimit:
    """One target's per-call limit (``seconds``, from ``--impl-timeout``) and the functions that
    already ran past it, which are not called again (a hanging target would otherwise cost the
    full limit for every example Hypothesis tries). Owned by the ``Target`` (``target.limit``):
    each session, and each ``harness repro`` / ``harness bench``, has its own."""

    seconds: float = DEFAULT_TIMEOUT
    #: id -> (fn, kept alive so the id stays unique; its arguments, for the message)
    hung: dict[int, tuple[Callable, str]] = field(default_factory=dict)


class ImplementationError(AssertionError):
    """The target raised, hung, mutated its input or returned the wrong kind of thing."""


class CallTimeout(Exception):
    pass


def describe_args(args: tuple, kwargs: dict) -> str:
    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            return f"Tensor{tuple(v.shape)}:{str(v.dtype).replace('torch.', '')}"
        if isinstance(v, (list, tuple)) and len(v) > 4:
            return f"{type(v).__name__}(len={len(v)})"
        return repr(v)
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _fingerprint(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    return None


def _raise_timeout(signum, frame):  # noqa: ARG001
    raise CallTimeout()


#: protocol names whose output must be new memory, never a view of an input (derived from the
#: records' ``new_memory``): an attention output that aliases its query is overwritten by (or
#: overwrites) the caller's next in-place op on either
NO_ALIAS = protocol.NO_ALIAS

#: the arguments (by position and by keyword) a protocol name may modify in place (derived from the
#: records' ``writes``); every other input must come back unmodified. In a worker they are sent back
#: after the call and copied into the caller's tensors (``harness.isolation``), so a suite reads the
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


def call(limit: CallLimit, fn: Callable, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` under the guard and the target's ``limit`` (``target.limit``);
    see the module docstring. A handle into a target's worker (``harness.isolation.Remote``) is
    called there, under the same rules and its worker's limit."""
    from harness.isolation import Remote
    if isinstance(fn, Remote):
        return fn._worker.call(fn, name, args, kwargs)
    seconds = limit.seconds
    if id(fn) in limit.hung:
        raise ImplementationError(
            f"{name} previously did not return within the per-call limit of {seconds:g} s "
            f"(--impl-timeout) when called with ({limit.hung[id(fn)][1]}); not called again")
    mutable = MUTABLE.get(name, frozenset())
    snapshots = [(i, _fingerprint(a)) for i, a in enumerate(args) if i not in mutable]
    snapshots += [(k, _fingerprint(v)) for k, v in kwargs.items() if k not in mutable]
    shapes = {key: tuple(t.shape) for key, t in [*enumerate(args), *kwargs.items()]
              if key in mutable and isinstance(t, torch.Tensor)}
    shown = describe_args(args, kwargs)
    use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    start = time.perf_counter()
    old_handler = None
    if use_alarm:
        old_handler = signal.signal(signal.SIGALRM, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        result = fn(*args, **kwargs)
    except CallTimeout:
        limit.hung[id(fn)] = (fn, shown)
        raise ImplementationError(
            f"{name}({shown}) did not return within the per-call limit of {seconds:g} s "
            f"(--impl-timeout)") from None
    except ImplementationError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit() in a target must not end the session
        raise ImplementationError(
            f"{name}({shown}) raised {type(exc).__name__}: {exc}") from exc
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
    elapsed = time.perf_counter() - start
    if elapsed > seconds:
        raise ImplementationError(
            f"{name}({shown}) took {elapsed:.1f} s, over the per-call limit of {seconds:g} s")
    for key, snap in snapshots:
        if snap is None:
            continue
        now = args[key] if isinstance(key, int) else kwargs[key]
        if now.shape != snap.shape or not torch.equal(now.detach(), snap):
            raise ImplementationError(f"{name}({shown}) modified its input in place ({argument_label(key)})")
    for key, shape in shapes.items():
        now = args[key] if isinstance(key, int) else kwargs[key]
        if tuple(now.shape) != shape:
            raise ImplementationError(f"{name}({shown}) resized its {argument_label(key)} from {shape} to "
                                      f"{tuple(now.shape)}: it may only write into it")
    alias = aliased_argument(result, args, kwargs) if name in NO_ALIAS else None
    if alias:
        raise ImplementationError(f"{name}({shown}) returned a tensor that shares the memory of its {alias}: "
                                  f"the output must be new memory")
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
