import importlib
import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings


# The self-tests run under `pytest -n 2` already: a `harness check` they start runs in its one
# process unless a test asks for --jobs (its default, auto, would start a worker per core in each).
os.environ["HARNESS_JOBS"] = "1"


@pytest.fixture(autouse=True)
def _isolated():
    """One torch thread: the suites' tensors are tiny, and on a shared machine intra-op
    threads' spin-waiting makes them an order of magnitude slower. In-process suite runs
    set the Hypothesis profile globally: restore it afterwards. (The plug-in's session state --
    results, targets, their per-call limits and per-test outcomes -- belongs to each run's
    config and targets, so nothing else needs restoring.)"""
    threads, profile = torch.get_num_threads(), settings._current_profile
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    settings.load_profile(profile)


# Every suite test freezes the Hypothesis profile loaded when it is decorated (@given without
# @settings takes settings.default then; an explicit @settings(...) takes its other values from it),
# and the suites are imported once, below, for the whole session: the `--hypothesis-profile` that an
# in-process run passes (planted_support.run_suite: harness-ci) does NOT reach them. So the profile
# loaded here is the one every in-process suite run uses, and it is harness-ci whatever $CI says:
# derandomized, no example database, one failure reported. It used to be harness-dev outside CI:
# random examples (a planted bug escaped 30 of them in a few percent of runs: kd_log_of_softmax,
# rope_angles_float32_for_float64), failing examples stored in the checkout's .hypothesis/ and
# replayed by the next run, and Hypothesis' 10 s after-the-first-failure search for other failures,
# which a loaded machine cuts short. (Else Hypothesis' own default, with its 200 ms deadline, would
# be frozen into them.) tests/test_selftest_profile.py checks this.
import harness.plugin  # noqa: E402,F401  (registers the profiles)

settings.load_profile("harness-ci")

# Imported once here: pytester's in-process runs restore sys.modules afterwards, so anything
# first imported inside a run (pandas and tabulate for the conformance table, the suites)
# would be imported again by every run.
import harness.verdicts.conformance_table  # noqa: E402,F401
import tabulate  # noqa: E402,F401  (pandas' to_markdown)
# (and what starting a target's worker imports: a second multiprocessing.heap after a run's restore
# fails the next worker's start with "Can't pickle BufferWrapper: it's not the same object", which a
# test file run alone -- tests/test_planted_attention.py -- met first)
import multiprocessing.forkserver  # noqa: E402,F401
import multiprocessing.heap  # noqa: E402,F401
import multiprocessing.popen_forkserver  # noqa: E402,F401

_ROOT = Path(__file__).resolve().parents[1]
for _suite in sorted((_ROOT / "suites").rglob("test_*.py")):  # suites/<family>/test_*.py
    importlib.import_module(".".join(_suite.relative_to(_ROOT).with_suffix("").parts))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "optional_libs(*modules): the test needs these optional libraries (import names of "
        "harness.basics.optional.LIBRARIES): skipped with the install command where one is missing, failed "
        "instead where $HARNESS_REQUIRE_OPTIONAL (or the library's own $HARNESS_REQUIRE_*) is set (CI)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """``@pytest.mark.optional_libs(...)`` (on the test, its class, its module's ``pytestmark`` or a
    ``pytest.param``): README command 1 installs none of harness.basics.optional's libraries, so a test that
    needs one skips there, naming the pinned install command; CI installs them all and sets
    $HARNESS_REQUIRE_OPTIONAL, where a missing one fails (a check that skips proves nothing).
    tests/test_optional_libs.py checks that every test needing one carries the mark."""
    from harness.basics import optional
    modules = [m for mark in item.iter_markers("optional_libs") for m in mark.args]
    unknown = sorted(set(modules) - set(optional.LIBRARIES))
    if unknown:
        pytest.fail(f"optional_libs({', '.join(unknown)}): not in harness.basics.optional.LIBRARIES "
                    f"({', '.join(optional.LIBRARIES)})", pytrace=False)
    for module in dict.fromkeys(modules):
        why = optional.missing(module)
        if why and optional.required(module):
            pytest.fail(f"required here (${optional.required(module)}): {why}", pytrace=False)
        if why:
            pytest.skip(why)


@pytest.fixture
def write(tmp_path):
    """Write a target file (``write(name, text, where=None)`` -> its path); forget the modules it
    loaded afterwards. Used by the loader and protocol-name tests."""
    import sys
    import textwrap

    from harness.boundary.target_import import _module_name_for_file

    written = []

    def _write(name: str, text: str, where=None) -> str:
        path = (where or tmp_path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        written.append(str(path))
        return str(path)

    yield _write
    for path in written:
        sys.modules.pop(_module_name_for_file(path), None)
