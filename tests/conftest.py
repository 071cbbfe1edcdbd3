import importlib
import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings

from harness import guard


@pytest.fixture(autouse=True)
def _isolated():
    """One torch thread: the suites' tensors are tiny, and on a shared machine intra-op
    threads' spin-waiting makes them an order of magnitude slower. In-process suite runs
    set the Hypothesis profile and the per-call limit globally: restore them afterwards."""
    threads, profile, timeout = torch.get_num_threads(), settings._current_profile, guard.get_timeout()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    settings.load_profile(profile)
    guard.set_timeout(timeout)


# The suites' explicit @settings(...) take their other values (deadline, derandomize, health
# checks) from the profile loaded when they are decorated. A user's session imports the suites after
# the plug-in loaded its profile; this session imports them below, so load it first (else
# Hypothesis' own default, with its 200 ms deadline, would be frozen into them outside CI).
import harness.plugin  # noqa: E402,F401  (registers the profiles)

settings.load_profile("harness-ci" if os.environ.get("CI") else "harness-dev")

# Imported once here: pytester's in-process runs restore sys.modules afterwards, so anything
# first imported inside a run (pandas and tabulate for the conformance table, the suites)
# would be imported again by every run.
import reports.conformance  # noqa: E402,F401
import tabulate  # noqa: E402,F401  (pandas' to_markdown)

for _suite in sorted((Path(__file__).resolve().parents[1] / "suites").glob("test_*.py")):
    importlib.import_module(f"suites.{_suite.stem}")
