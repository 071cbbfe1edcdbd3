"""History independence of every protocol function: the same call gives the same answer after any
other calls of the same name (long then short, an offset then none, other dtypes, batch sizes and
scales). One property per function, ``history.<name>``; how a history is drawn and judged:
``suites/histories.py``.

Each property draws a first call, 1-3 other calls (sharing the first call's identity fields -- its
family's ``keep`` -- with probability 1/2 each) and the first call again, and judges every call with
the family's single-call check, or, for the generator-driven samplers, the repeat against the first
call exactly. Each family declares its functions' histories (``HISTORIES`` in
``suites/<family>/specs.py``); this module is built from them (``histories.install``): a
``check_<name>`` and a ``test_<name>`` per function, as if written here.
"""
from __future__ import annotations

from harness.suites.histories import install

PROPERTY_PREFIX = "history"

install(globals())
