"""Whether a pytest run is a harness session, and what it collects of the harness's own suites.

The plug-in is loaded by every pytest run in an environment where the harness is installed; a
session is the harness's only when the user asked for it (``harness.plugin`` calls these).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.basics import layout


def is_harness_session(config: pytest.Config) -> bool:
    """Whether this pytest run is about the harness: what the user asked for, never a folder name
    that might be theirs. ``--impl`` / ``$HARNESS_IMPL``; the harness's own suites (``--pyargs
    harness.suites``, or a path in the suites' folder wherever it is installed); in a checkout of
    the harness, a path in (or above) the checkout. The plug-in is loaded by every pytest run in an
    environment where the harness is installed; in another project's session (their own
    ``suites/`` included) it changes nothing global (no Hypothesis profile, no torch thread count,
    no header)."""
    if config.getoption("impl") or os.environ.get("HARNESS_IMPL"):
        return True
    ours = [layout.SUITES.resolve()] + ([layout.CHECKOUT.resolve()] if layout.CHECKOUT else [])
    for arg in config.args:
        head = arg.split("::")[0]
        if head == "harness.suites" or head.startswith("harness.suites."):
            return True
        p = Path(head).resolve()
        if any(p == root or root in p.parents for root in ours):
            return True
        if layout.CHECKOUT and p in ours[-1].parents:
            return True
    return False


def benchmarks_requested(config: pytest.Config) -> bool:
    """Whether this run asked for the suites' pytest-benchmark tests (``suites/benchmarks``):
    ``--benchmark-json``, ``--benchmark-only``, ``--benchmark-enable`` or ``HARNESS_BENCHMARKS=1``."""
    if os.environ.get("HARNESS_BENCHMARKS", "") not in ("", "0"):
        return True
    return any(config.getoption(opt, None) for opt in ("benchmark_json", "benchmark_only", "benchmark_enable"))


def ignore_benchmarks(collection_path: Path, config: pytest.Config) -> bool | None:
    """The suites' benchmarks folder is left out of a conformance run (``pytest --pyargs
    harness.suites``, as ``harness check``) unless benchmarks are asked for or it is named itself."""
    if collection_path.name != "benchmarks" or collection_path.parent.resolve() != layout.SUITES.resolve():
        return None
    if benchmarks_requested(config):
        return None
    folder = collection_path.resolve()
    for arg in (a.split("::")[0] for a in config.args):
        path = Path(arg).resolve()
        if arg.startswith("harness.suites.benchmarks") or path == folder or folder in path.parents:
            return None
    return True
