"""The planted-bug tests' verdicts depend neither on $CI nor on how busy the machine is.

Every suite test keeps the Hypothesis settings that were current when it was decorated, and this
session decorates them once (tests/conftest.py imports the suites): the ``--hypothesis-profile``
that an in-process run passes does not reach them. They must hold the derandomized profile with
no example database, no deadline and one reported failure, also when $CI is not set (issue 10:
outside CI they were random, and a planted bug escaped its 30 examples in a few percent of runs).
"""
from __future__ import annotations

import sys

from hypothesis import settings


def _suite_tests() -> dict[str, object]:
    return {f"{name}.{attr}": fn for name, module in sorted(sys.modules.items())
            if name.startswith("suites.") and name.rsplit(".", 1)[-1].startswith("test_")  # suites/<family>/test_*.py
            for attr, fn in vars(module).items() if attr.startswith("test_") and hasattr(fn, "hypothesis")}


def _deterministic(s: settings) -> bool:
    return s.derandomize and s.database is None and s.deadline is None and not s.report_multiple_bugs


def test_harness_ci_is_speed_independent():
    """Derandomized, no deadline, and one failure: looking for further failures, Hypothesis stops
    10 s (wall clock) after the first, so how many it reported depended on the machine's speed."""
    assert _deterministic(settings.get_profile("harness-ci"))


def test_every_preloaded_suite_test_runs_the_ci_profile():
    tests = _suite_tests()
    assert len(tests) > 50, sorted(tests)
    # (what @given froze: Hypothesis keeps it in this attribute and offers no public getter)
    loose = {name: fn._hypothesis_internal_use_settings for name, fn in tests.items()
             if not _deterministic(fn._hypothesis_internal_use_settings)}
    assert not loose, f"suite tests that would not run derandomized in the planted-bug tests: {loose}"
