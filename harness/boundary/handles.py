"""Handles to objects that live in a target's worker process (``harness.boundary.isolation``).

A ``Remote`` stands for the worker's object: calling it, reading or writing an attribute crosses
to the worker (``WorkerBackend.call`` / ``request``); passed back to the worker, it is resolved to the
object again. ``is_module`` tells an ``nn.Module`` here or there; ``named`` renames a handle in
messages and in the per-call limit's "not called again" rule; ``method(obj, "to")`` is ``obj.to``
to be called, which for a handle costs one round trip (the call) instead of two (read, then call).
"""
from __future__ import annotations

from typing import Any

import torch

from harness.boundary import wire


class Remote:
    """A handle to an object in a target's worker. ``isinstance(x, Remote)`` tells a handle;
    ``is_module(x)`` whether it stands for an ``nn.Module``."""

    __slots__ = ("_worker", "_ref", "_name", "_owner", "_attr", "__weakref__")

    def __init__(self, worker: Any, ref: wire.Ref, name: str, owner: Remote | None = None,
                 attr: str | None = None):
        """``worker``: the ``harness.boundary.isolation.WorkerBackend`` that holds the object. With ``owner``
        and ``attr`` the handle is ``owner``'s method ``attr``, read in the worker when it is called
        (``method``); it holds ``owner`` alive and shares its ``ref``."""
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_attr", attr)

    @property
    def _callee(self):
        """What a call request names: the object's token, or (owner's token, method name)."""
        return self._ref if self._attr is None else (self._ref, self._attr)

    def __call__(self, *args, **kwargs):
        return self._worker.call(self, self._name, args, kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self._attr is not None:  # an attribute of a method: read the method itself first
            return getattr(self._worker.request(("getattr", self._ref, self._attr), self._name), attr)
        return self._worker.request(("getattr", self._ref, attr), f"{self._name}.{attr}")

    def _repr_pretty_(self, printer, cycle) -> None:
        """Hypothesis's (IPython's) pretty printer: the repr, without asking the worker whether its
        object has a ``_repr_pretty_`` (it prints the test's arguments for every example)."""
        printer.text(repr(self))

    def __setattr__(self, attr: str, value) -> None:
        self._worker.request(("setattr", self._ref, attr, value), f"setting {self._name}.{attr}")

    def __repr__(self) -> str:
        where = f"in the worker of {self._worker.spec!r}"
        if self._attr is not None:
            return f"<method {self._attr} of {self._ref.type_name} {where}>"
        return f"<{self._ref.type_name} {where}>"

    def __reduce_ex__(self, protocol):
        """Sent back to its worker as its token, which the worker resolves to the object."""
        if self._attr is not None:
            raise TypeError(f"{self!r} is a method handle, to be called, not sent to the worker")
        r = self._ref
        return (wire.Ref, (r.oid, r.generation, r.type_name, r.is_module, r.is_callable))

    def __del__(self):
        w = self._worker
        if self._attr is None and w.generation == self._ref.generation:  # (a method's owner frees it)
            w.garbage.append(self._ref.oid)


def call_remote(fn: Remote, name: str, args: tuple, kwargs: dict, *, wait: bool = True) -> Any:
    """Call the handle ``fn`` in its worker under the worker's call rules (``guard.call`` and
    ``runner.submit_call`` come here for a handle): the result, or with ``wait=False`` a
    ``harness.boundary.pending.Pending`` of it."""
    return fn._worker.call(fn, name, args, kwargs, wait=wait)


def is_remote(obj: Any) -> bool:
    """A handle to an object that lives in a worker process."""
    return isinstance(obj, Remote)


def is_module(obj: Any) -> bool:
    """An ``nn.Module``, here or in a worker."""
    return isinstance(obj, torch.nn.Module) or (isinstance(obj, Remote) and obj._attr is None
                                                 and obj._ref.is_module)


def method(obj: Any, attr: str) -> Any:
    """``obj.attr``, to be called: for a handle, a handle to its method ``attr`` that is read in the
    worker when it is called (one round trip for ``mod.to(...)`` instead of two); a missing method
    raises there, as the call's error. Anything else: ``getattr(obj, attr)``."""
    if isinstance(obj, Remote) and obj._attr is None:
        return Remote(obj._worker, obj._ref, f"{obj._name}.{attr}", owner=obj, attr=attr)
    try:
        return getattr(obj, attr)
    except AttributeError as exc:  # (raised by the call, as in a worker)
        error = exc

        def missing(*args: Any, **kwargs: Any) -> Any:
            raise error

        return missing


def _renamed(remote: Remote, name: str) -> Remote:
    object.__setattr__(remote, "_name", name)
    return remote


def named(obj: Any, name: str) -> Any:
    """A handle called ``name`` in messages (and in the per-call limit's "not called again"
    rule); anything that is not a handle is returned as it is."""
    return _renamed(obj, name) if isinstance(obj, Remote) else obj


def materialize(worker: Any, value: Any, what: str) -> Any:
    """A worker's reply value with each ``wire.Ref`` in it (in tuples, lists, dicts) made a
    ``Remote`` of ``worker``, named after the call ``what`` that returned it."""
    if isinstance(value, wire.Ref):
        return Remote(worker, value, getattr(what, "name", None) or str(what).split("(")[0])
    if type(value) in (tuple, list):
        return type(value)(materialize(worker, v, what) for v in value)
    if type(value) is dict:
        return {k: materialize(worker, v, what) for k, v in value.items()}
    return value
