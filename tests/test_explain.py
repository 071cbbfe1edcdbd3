"""A failure's costly explanation (``harness.spec.explain``) is computed for the failure that is reported,
not for each example Hypothesis or the boundary shrinker tries on the way: ``rope.relative``'s
float64 replay and angle measurement tripled every shrink step of a planted RoPE (38 s for one
failure in CI). The message reported is unchanged.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from harness.spec import explain
from harness.runner import PropertyFailure
from harness.suites import boundary, regimes


def test_outside_hypothesis_a_failure_is_explained():
    """``harness repro`` and a sweep's replays run checks without Hypothesis: always explained."""
    assert explain.wanted() and explain.later(lambda: "because") == "\nbecause"
    with explain.quietly():
        assert not explain.wanted() and explain.later(lambda: "because") == ""
        with explain.quietly():
            assert not explain.wanted()
        assert not explain.wanted()  # (nested: still quiet until the outer block ends)
    assert explain.wanted()


def test_hypothesis_explains_only_the_example_it_reports():
    """Generation and shrinking try many failing examples; the explanation runs for the final
    replay of the smallest, and the raised message carries it."""
    explained = []

    @settings(database=None, max_examples=100, derandomize=True)
    @given(st.integers(0, 10_000))
    def prop(n):
        if n > 10:
            raise AssertionError(f"{n} is too big" + explain.later(lambda: explained.append(n) or f"explained {n}"))

    with pytest.raises(AssertionError) as info:
        prop()
    assert explained == [11], explained  # once, for the shrunk example
    assert "11 is too big\nexplained 11" in str(info.value)


def test_an_explicit_example_is_explained():
    """An explicit (boundary) example is reported as it is: explained."""
    explained = []

    @settings(database=None, max_examples=1)
    @given(st.integers(0, 5))
    def prop(n):
        raise AssertionError("fails" + explain.later(lambda: explained.append(n) or "why"))

    from hypothesis import example
    with pytest.raises(AssertionError) as info:
        example(n=99)(prop)()
    assert explained[:1] == [99] and "fails\nwhy" in str(info.value)


def test_the_boundary_shrinker_explains_its_result_once():
    """The shrinker's replays run quietly; the smallest failing configuration is replayed once more,
    with its explanation, for the report."""
    cfg = regimes.ROPE[1]  # L = 129, D = 160
    explained = []

    def replay(c):
        if c.D <= 128:
            return None
        why = explain.later(lambda: explained.append(c) or "explained")
        return PropertyFailure("fam.prop", "property violated", "t.py", f"wrong at D={c.D}{why}", str(c), "repro")

    first = replay(cfg)
    explained.clear()
    reported = boundary.boundary_failure(cfg, first, replay)
    assert len(explained) == 1 and explained[0].D == 130, explained
    assert "wrong at D=130\nexplained" in reported.detail and "shrunk from the boundary example" in reported.detail
