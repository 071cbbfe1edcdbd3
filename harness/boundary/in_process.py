"""A target imported into the harness's own process (``--isolation none``, for debugging with pdb):
the in-process backend of a ``Target``. ``harness.boundary.isolation.WorkerBackend`` is the other one; both
answer the same requests (``lookup``, ``call``, ``apply``, ``seed_next``, ``close``, ``limit``,
``isolated``), and both hold calls to the call rules (``harness.boundary.guard``)."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

from harness.boundary import guard, interpret
from harness.boundary.pending import Pending
from harness.boundary.target_import import TargetInfo, load_here, lookup_attribute


class InProcessBackend:
    """The target's module, imported here (``module``; None until ``start`` or when it does not load)."""

    isolated = False

    def __init__(self, spec: str, module: ModuleType | None = None, timeout: float | None = None):
        self.spec = spec
        self.module = module
        #: the per-call limit of the calls made here
        self.limit = guard.CallLimit(guard.DEFAULT_TIMEOUT if timeout is None else float(timeout))

    def start(self, how: str) -> TargetInfo:
        """Import the target (``how``: ``harness.boundary.interpret.mode``); its ``TargetInfo``, whose
        ``load_error`` says why when it does not load (never raises)."""
        self.module, info = load_here(self.spec, how)
        self.limit.seconds *= interpret.limit_factor(info)
        return info

    def lookup(self, name: str) -> Any:
        return lookup_attribute(self.spec, self.module, name)

    def call(self, fn: Callable, name: str, args: tuple, kwargs: dict) -> Any:
        """``fn(*args, **kwargs)`` under the call rules."""
        return guard.call(self.limit, fn, name, *args, **kwargs)

    def apply(self, fn: Callable, args: tuple, kwargs: dict, what: str, wait: bool = True) -> Any:
        """``fn(*args, **kwargs)``: harness code next to the target's objects. Its
        ``AssertionError`` is a property's verdict; anything else it raises is the target's.
        ``wait=False``: a ``Pending`` of it (run now)."""
        if not wait:
            return Pending.now(self.apply, fn, args, kwargs, what)
        try:
            return guard.call(self.limit, fn, what, *args, **kwargs)
        except guard.ImplementationError as exc:
            if isinstance(exc.__cause__, AssertionError) and not isinstance(exc.__cause__, guard.ImplementationError):
                raise exc.__cause__ from None
            raise

    def seed_next(self, seed: int) -> None:
        """Nothing to do: the caller seeds this process's RNG itself."""

    def close(self) -> None:
        """Nothing to stop."""
