"""Bugs that only two options together expose (issue 43): each planted target in
``tests/planted/pairwise/`` fails its ``options_together`` property (the covering set,
``suites.pairwise``) under the derandomized ci profile, with the property's name and a repro line,
while the properties of each of its two options alone pass it. The catches run in
``tests/test_planted_bugs.py`` from each file's docstring. The covering sets themselves
(every pair of values meets, every option joins) are ``tests/test_pairwise.py``'s.
"""
from __future__ import annotations

import re

import pytest

import planted_index
from planted_support import conformance, run_suite, suite_tests

#: the two-option bugs (each file names its property, what the failure says, and, in ``Alone:`` lines,
#: the single-option properties ``<suite file> -k <expression>`` that pass it)
BUGS = planted_index.planted("pairwise")


def alone(bug) -> list[tuple[str, str]]:
    """(suite file, -k expression) of each ``Alone:`` line of ``bug``'s docstring."""
    return [tuple(line.split(" -k ", 1)) for line in
            re.findall(r"^\s*Alone:\s*(.*?)\s*$", planted_index.docstring(bug.path), re.M)]


def test_every_bug_needs_two_options_and_every_property_has_one():
    """Each file lists the single-option properties that pass it; each options_together property
    has at least one planted bug (the driver, tests/test_planted_bugs.py, runs the catches)."""
    for bug in BUGS:
        assert alone(bug), f"{bug.id}: no 'Alone: <suite> -k <expression>' line"
        for suite, k in alone(bug):
            assert suite_tests(suite) and k, (bug.id, suite, k)
    for suite in ("test_kvcache_pairwise.py", "test_options_together.py"):
        assert set(suite_tests(suite)) <= {b.test for b in BUGS if b.suite.name == suite}, f"{suite}: a property without a bug"


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_each_option_alone_passes_it(pytester, tmp_path, bug):
    """The bug is one of two options together: the properties of each option alone pass it (so no
    property before the covering sets could catch it, at the ci profile's seeds)."""
    for i, (suite, k) in enumerate(alone(bug)):
        report = tmp_path / f"report{i}"
        result = run_suite(pytester, [suite], [bug.path], k, "--conformance-report", str(report))
        assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-3000:]
        assert any(cell.startswith(("pass", "convention")) for cell in conformance(report).values())
