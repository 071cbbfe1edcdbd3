"""The garbage collector of a conformance run's pytest processes (issue 46).

A run allocates millions of short-lived objects (tensors, Hypothesis' choice nodes) on top of a
heap of long-lived ones (torch, transformers, Hypothesis, the collected suites). CPython's full
collections traverse all of the latter every time: measured on the reference target's CI-profile
run in one process (2-core machine, 30 s run): 3669 young, 333 middle and 15 full collections took
4.0 s, the 15 full ones 3.3 s of it, and pytest's own two ``gc.collect()`` at the end (its
unraisable-exception plugin, which ``harness check`` does not load) 0.8 s more.

``settle()``, called once the suites are collected, moves everything alive then into the permanent
generation (``gc.freeze``: imports and collected items are never garbage) and makes the automatic
full collection rare (after every ``FULL_EVERY`` middle ones instead of 10); young and middle
collections, which free the cycles a property makes, run as before. Measured the same way: 1.0 s
of collection in all. It applies where ``harness check`` asks for it ($HARNESS_GC=settle, inherited
by pytest-xdist workers), never in a user's own pytest session, whose heap is theirs.
"""
from __future__ import annotations

import gc
import os

#: the environment variable ``harness check`` sets; "settle" turns ``settle`` on
ENV = "HARNESS_GC"
#: full collections after this many middle-generation ones (CPython's default: 10)
FULL_EVERY = 100


def settle() -> bool:
    """Freeze the heap as it is and space out full collections, when $HARNESS_GC is "settle";
    returns whether it did."""
    if os.environ.get(ENV) != "settle":
        return False
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_EVERY)
    return True
