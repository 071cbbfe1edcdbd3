"""The tiers of the Triton self-tests (``harness.boundary.interpret``'s ``$HARNESS_INTERPRET_TIER``): the
smoke tier runs in CI (the README's test command); the full tier's long runs are opt-in
(``$HARNESS_TRITON_SUITES=1``), their measured times in notes/MEASUREMENTS.md ("Triton suites in CI")."""
from __future__ import annotations

import os

import pytest

from harness.boundary.interpret import CHECKS_ENV, TIER_ENV

OPT_IN = "HARNESS_TRITON_SUITES"
TIERS = ("smoke", "full")


def opted_in() -> bool:
    return bool(os.environ.get(OPT_IN))


def use_tier(monkeypatch, tier: str, checks: int | None = None) -> None:
    """Run the in-process suites of this test in ``tier`` (``checks``: a fixed number of checks per
    property, ``$HARNESS_INTERPRET_CHECKS``; None: the tier's own)."""
    assert tier in TIERS, tier
    if tier == "smoke":
        monkeypatch.setenv(TIER_ENV, "smoke")
    else:
        monkeypatch.delenv(TIER_ENV, raising=False)
    if checks is None:
        monkeypatch.delenv(CHECKS_ENV, raising=False)
    else:
        monkeypatch.setenv(CHECKS_ENV, str(checks))


def full_tier_only(why: str):
    """A mark: skipped unless the full tier is opted in (``why``: its cost, for the skip reason)."""
    return pytest.mark.skipif(not opted_in(), reason=f"{why}: the full tier, set ${OPT_IN}=1 to run it")
