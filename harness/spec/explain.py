"""A failure's costly explanation, computed once: for the example that is reported, not for every
example Hypothesis or the boundary shrinker (``suites.boundary``) tries on the way to it.

Some checks say more than "the property does not hold": ``rope.relative`` replays the configuration
in float64 and measures the target's angles to name the property of the cause. That costs two
more runs of the check, and a shrink replays a failing check tens of times; only the last failure's
message is read. So a check writes::

    raise AssertionError(where + explain.later(lambda: relative_cause(target, cfg)))

``later(fn)`` is ``fn()`` when the failure can be the one reported (outside Hypothesis, e.g.
``harness repro``; Hypothesis's final replay of the shrunk example; an explicit example) and ""
while Hypothesis generates or shrinks, or inside ``quietly()`` (the boundary shrinker's replays;
it replays the smallest failing configuration once more outside ``quietly`` for the report).
What a check decides never depends on it: the failure's first line, which Hypothesis and the
shrinker compare, is the same either way.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

_state = threading.local()


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """Within: ``later`` returns "" (replays whose message nobody reads)."""
    depth = getattr(_state, "depth", 0)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth


def wanted() -> bool:
    """Whether a failure raised now can be the one reported."""
    if getattr(_state, "depth", 0):
        return False
    try:
        from hypothesis.control import _current_build_context
    except ImportError:  # (another Hypothesis layout: explain every time, never less)
        return True
    context = _current_build_context.value
    return context is None or getattr(context, "is_final", True)


def later(fn: Callable[[], str]) -> str:
    """``fn()`` (an explanation appended to a failure's message) when ``wanted()``, else "". It starts
    a new line (one is put before it if it does not): the first line, which the shrinkers compare to
    tell one failure from another, is the same explained or not."""
    if not wanted():
        return ""
    text = fn()
    return text if not text or text.startswith("\n") else "\n" + text
