"""A call into a target whose result is read later (``runner.submit``).

In a worker (``harness.boundary.isolation``) the request is sent at once and its reply read by
``result()``: the target computes in its process while the harness computes what it will compare
the result with (the float64 truth, the policy's naive yardstick), on the other core. In-process
the call has run already and ``result()`` hands back its value or raises its error, so a property
reads the same either way. A target's error is raised by ``result()``, never by ``submit``
(except the call rules' refusals that come before any call: a name that hung before).

Rules for the caller: the arguments must not be read or written until ``result()`` (a name that
writes into its arguments, ``guard.writes_into``, gets the writes copied back then), and a worker
keeps one request in flight: the next request first settles this one (its result is kept).
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["Pending", "resolved"]

_UNSET = object()


class Pending:
    """The result of a call, read with ``result()``; ``settle()`` reads it without returning it
    (the worker backend settles a request in flight before it sends the next)."""

    __slots__ = ("_settle", "_value", "_error")

    def __init__(self, settle: Callable[[], Any]):
        """``settle()``: returns the result or raises the call's error; called once."""
        self._settle: Callable[[], Any] | None = settle
        self._value: Any = _UNSET
        self._error: BaseException | None = None

    @classmethod
    def now(cls, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Pending:
        """``fn(*args, **kwargs)`` run now; its value or error kept for ``result()``."""
        p = cls(lambda: fn(*args, **kwargs))
        p.settle()
        return p

    @property
    def done(self) -> bool:
        return self._settle is None

    def settle(self) -> None:
        settle, self._settle = self._settle, None
        if settle is None:
            return
        try:
            self._value = settle()
        except BaseException as exc:  # noqa: BLE001 - kept, raised by result()
            self._error = exc

    def result(self) -> Any:
        self.settle()
        if self._error is not None:
            raise self._error
        return self._value

    def then(self, fn: Callable[[Any], Any]) -> Pending:
        """A ``Pending`` of ``fn(result)`` (e.g. the output's shape check), run when it is read."""
        return Pending(lambda: fn(self.result()))


def resolved(value: Any) -> Any:
    """``value.result()`` for a ``Pending``; anything else as it is."""
    return value.result() if isinstance(value, Pending) else value
