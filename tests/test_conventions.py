"""Named conventions (harness/spec/conventions.py): check_convention's outcomes and
messages, declarations in a module and on the command line."""
from __future__ import annotations

import types

import pytest

from harness.spec.conventions import (DECLARATION_ATTR, KNOWN, ConventionMismatch, check_convention,
                                 declared_conventions, parse_cli)
from harness.boundary.in_process import InProcessBackend
from harness.boundary.loader import Target
from harness.boundary.target_import import describe_module


def test_default_measured_gives_its_label():
    assert check_convention("causal_alignment", "top_left", {}) == "convention:top_left"


def test_other_known_value_against_the_default_is_a_mismatch_that_explains_itself():
    with pytest.raises(ConventionMismatch) as info:
        check_convention("causal_alignment", "bottom_right", {}, "\n  evidence here")
    msg = str(info.value)
    assert msg.startswith("causal_alignment: the code follows bottom_right (FlashAttention")
    assert "but the protocol default is top_left (torch SDPA" in msg
    assert "named convention, not necessarily a bug" in msg
    assert f"{DECLARATION_ATTR} = {{'causal_alignment': 'bottom_right'}}" in msg
    assert "--convention causal_alignment=bottom_right" in msg
    assert msg.endswith("evidence here")


def test_declared_value_is_accepted_and_labelled():
    declared = {"causal_alignment": "bottom_right"}
    assert check_convention("causal_alignment", "bottom_right", declared) == "convention:bottom_right"


def test_declared_value_that_the_code_does_not_follow():
    with pytest.raises(ConventionMismatch, match="the code follows top_left .* but declared is bottom_right"):
        check_convention("causal_alignment", "top_left", {"causal_alignment": "bottom_right"})


def test_unknown_behaviour_lists_the_known_conventions():
    with pytest.raises(ConventionMismatch) as info:
        check_convention("window_extent", None, {}, " EVIDENCE")
    msg = str(info.value)
    assert msg.startswith("window_extent: the behaviour matches no known convention (known: w (")
    assert "; w+1 (FlashAttention" in msg
    assert msg.endswith(" EVIDENCE")


def test_unknown_behaviour_fails_even_when_something_is_declared():
    with pytest.raises(ConventionMismatch, match="matches no known convention"):
        check_convention("window_extent", None, {"window_extent": "w+1"})


@pytest.mark.parametrize("value", ["zeros", "nan", "uniform"])
def test_no_default_means_any_known_value_passes(value):
    assert KNOWN["fully_masked_rows"].default is None
    assert check_convention("fully_masked_rows", value, {}) == f"convention:{value}"


def test_no_default_but_declared_must_match():
    with pytest.raises(ConventionMismatch, match="follows nan .* but declared is zeros"):
        check_convention("fully_masked_rows", "nan", {"fully_masked_rows": "zeros"})
    with pytest.raises(ConventionMismatch, match="matches no known convention"):
        check_convention("fully_masked_rows", None, {})


def test_mismatch_is_an_assertion_error():
    # the runner and pytest treat it as a property failure
    assert issubclass(ConventionMismatch, AssertionError)


def test_unknown_key_is_a_programming_error():
    with pytest.raises(KeyError):
        check_convention("no_such_convention", "x", {})


def test_known_conventions_are_consistent():
    for key, conv in KNOWN.items():
        assert conv.key == key
        assert len(conv.values) >= 2, key
        assert conv.default is None or conv.default in conv.values, key
        for value, who in conv.values.items():
            assert who and conv.describe(value) == f"{value} ({who})"
    assert KNOWN["causal_alignment"].describe("sideways") == "sideways"


def test_declared_conventions_from_a_module():
    assert declared_conventions(None) == {}
    assert declared_conventions(types.ModuleType("bare")) == {}
    mod = types.ModuleType("declares")
    setattr(mod, DECLARATION_ATTR, {"window_extent": "w+1", 7: 8})
    assert declared_conventions(mod) == {"window_extent": "w+1", "7": "8"}
    setattr(mod, DECLARATION_ATTR, None)
    assert declared_conventions(mod) == {}


def test_parse_cli():
    assert parse_cli(None) == {}
    assert parse_cli([]) == {}
    assert parse_cli(["causal_alignment=bottom_right", " window_extent = w+1 "]) == {
        "causal_alignment": "bottom_right", "window_extent": "w+1"}
    assert parse_cli(["k=a=b"]) == {"k": "a=b"}
    assert parse_cli(["k=1", "k=2"]) == {"k": "2"}
    with pytest.raises(ValueError, match="--convention expects key=value, got 'bottom_right'"):
        parse_cli(["bottom_right"])


def test_command_line_overrides_the_module_declaration():
    mod = types.ModuleType("declares")
    setattr(mod, DECLARATION_ATTR, {"causal_alignment": "bottom_right", "window_extent": "w+1"})
    target = Target(spec="x", backend=InProcessBackend("x", mod), info=describe_module("x", mod),
                    cli_conventions={"causal_alignment": "top_left"})
    assert target.conventions == {"causal_alignment": "top_left", "window_extent": "w+1"}
    assert check_convention("causal_alignment", "top_left", target.conventions) == "convention:top_left"
    assert Target(spec="y").conventions == {}
