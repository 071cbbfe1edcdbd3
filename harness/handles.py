"""Handles to objects that live in a target's worker process (``harness.isolation``).

A ``Remote`` stands for the worker's object: calling it, reading or writing an attribute crosses
to the worker (``WorkerBackend.call`` / ``request``); passed back to the worker, it is resolved to the
object again. ``is_module`` tells an ``nn.Module`` here or there; ``named`` renames a handle in
messages and in the per-call limit's "not called again" rule.
"""
from __future__ import annotations

from typing import Any

import torch

from harness import wire


class Remote:
    """A handle to an object in a target's worker. ``isinstance(x, Remote)`` tells a handle;
    ``is_module(x)`` whether it stands for an ``nn.Module``."""

    __slots__ = ("_worker", "_ref", "_name", "__weakref__")

    def __init__(self, worker: Any, ref: wire.Ref, name: str):
        """``worker``: the ``harness.isolation.WorkerBackend`` that holds the object."""
        object.__setattr__(self, "_worker", worker)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_name", name)

    def __call__(self, *args, **kwargs):
        return self._worker.call(self, self._name, args, kwargs)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._worker.request(("getattr", self._ref, attr), f"{self._name}.{attr}")

    def __setattr__(self, attr: str, value) -> None:
        self._worker.request(("setattr", self._ref, attr, value), f"setting {self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<{self._ref.type_name} in the worker of {self._worker.spec!r}>"

    def __reduce_ex__(self, protocol):
        """Sent back to its worker as its token, which the worker resolves to the object."""
        r = self._ref
        return (wire.Ref, (r.oid, r.generation, r.type_name, r.is_module, r.is_callable))

    def __del__(self):
        w = self._worker
        if w.generation == self._ref.generation:
            w.garbage.append(self._ref.oid)


def is_remote(obj: Any) -> bool:
    """A handle to an object that lives in a worker process."""
    return isinstance(obj, Remote)


def is_module(obj: Any) -> bool:
    """An ``nn.Module``, here or in a worker."""
    return isinstance(obj, torch.nn.Module) or (isinstance(obj, Remote) and obj._ref.is_module)


def _renamed(remote: Remote, name: str) -> Remote:
    object.__setattr__(remote, "_name", name)
    return remote


def named(obj: Any, name: str) -> Any:
    """A handle called ``name`` in messages (and in the per-call limit's "not called again"
    rule); anything that is not a handle is returned as it is."""
    return _renamed(obj, name) if isinstance(obj, Remote) else obj
