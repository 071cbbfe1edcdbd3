"""Hostile targets are handled: a target that does not load, has the wrong signature,
raises, hangs, returns garbage or mutates its inputs is reported with a specific
message, per property, and the session goes on (the other properties and the other
target, ``reference``, still run and report).

The targets live in ``tests/planted/hostile/``; each case runs a few suite tests
in-process (``-k``) next to ``reference``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from planted_support import suite_file
from hypothesis import Phase, settings


ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "planted" / "hostile"
ATTENTION_SUITES = [suite_file(f) for f in ("test_attention.py", "test_attention_masks.py", "test_sliding_window.py")]
#: three properties from two suite files
THREE = "test_agreement or test_scale or test_causal"

#: The ci profile minus Hypothesis's explain phase: after a failure that phase
#: replays ~100 variations, which for a target that fails every call only repeats
#: the same message (and costs most of the run time).
settings.register_profile("hostile", parent=settings.get_profile("harness-ci"),
                          phases=[Phase.explicit, Phase.generate, Phase.shrink])
#: A target that hangs costs --impl-timeout per call, and Hypothesis keeps generating
#: after the first failure, so that case replays one example per property.
settings.register_profile("hostile-one-call", parent=settings.get_profile("harness-ci"),
                          max_examples=1, phases=[Phase.explicit, Phase.generate])


def run_suites(pytester, impls, k=THREE, suites=None, profile="hostile", extra=()):
    """Run attention suites in-process (default: the two SDPA suite files)."""
    args = [str(s) for s in (suites or ATTENTION_SUITES[:2])]
    for impl in impls:
        args += ["--impl", str(impl)]
    if k:
        args += ["-k", k]
    return pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider", "--hypothesis-profile", profile,
                                        "-rA", *extra)


def outcomes_by_target(result) -> dict[str, dict[str, int]]:
    """{target: {outcome: count}} from the short test summary (-rA)."""
    counts: dict[str, dict[str, int]] = {}
    for line in result.stdout.lines:
        m = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED)\b.*?\[(.+?)\]", line)
        if m:
            per = counts.setdefault(m.group(2), {})
            per[m.group(1)] = per.get(m.group(1), 0) + 1
    return counts


def assert_reference_unaffected(result, n: int = 3) -> None:
    """The well-behaved target in the same session passed its n properties."""
    assert outcomes_by_target(result).get("reference") == {"PASSED": n}, result.stdout.str()[-3000:]


def assert_each_property_reported(result, target: str) -> None:
    """Every selected property names itself in a failure message for the target."""
    out = result.stdout.str()
    for prop in ("attention.agreement", "attention.scale", "attention.causal"):
        pattern = rf"\[{re.escape(prop)}\] (implementation error|property violated|convention mismatch) " \
                  rf"for target {re.escape(repr(target))}"
        assert re.search(pattern, out), f"{prop} not reported:\n{out[-4000:]}"


def hostile(name: str) -> str:
    return str(HOSTILE / name)


# ---- targets that cannot be used at all: every property errors with the reason ----------------

def test_path_that_does_not_exist(pytester):
    missing = hostile("does_not_exist.py")
    result = run_suites(pytester, [missing, "no_such_module_for_the_harness", "reference"])
    result.assert_outcomes(passed=3, skipped=6)  # each test skipped with one short reason ...
    assert result.ret != 0  # ... and the session fails
    out = result.stdout.str()
    assert f"target {missing!r}: FileNotFoundError: no such file" in out  # the cause, once
    assert out.count("FileNotFoundError: no such file") == 2  # in the header and the summary
    assert "No module named 'no_such_module_for_the_harness'" in out
    assert "DOES NOT LOAD" in out  # the report header says so up front
    assert_reference_unaffected(result)


def test_file_that_raises_on_import(pytester):
    target = hostile("raises_on_import.py")
    result = run_suites(pytester, [target, "reference"])
    result.assert_outcomes(passed=3, skipped=3)
    assert result.ret != 0
    out = result.stdout.str()
    assert "targets that do not load" in out
    assert "RuntimeError: hostile target: boom at import time" in out
    assert "raises_on_import.py:" in out  # where it raised
    assert_reference_unaffected(result)


def test_wrong_signature_is_broken_not_skipped(pytester, tmp_path):
    """A wrong signature is a failure of the target (docs/protocol.md): a `fail` cell per property, its
    message printed once (issue 41: it was an `error`, printed twice as chained exceptions)."""
    target = hostile("wrong_signature.py")
    result = run_suites(pytester, [target, "reference"], extra=("--conformance-report", str(tmp_path)))
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    message = "scaled_dot_product_attention: signature (q, k) lacks parameter(s) query, key, value"
    assert message in out
    assert "the protocol calls scaled_dot_product_attention(query, key, value" in out
    assert "During handling of the above exception" not in out
    failures = out.split("= FAILURES =", 1)[1].split("= conformance", 1)[0]
    assert failures.count(message) == 3, failures  # once per failed property
    assert_reference_unaffected(result)
    import json
    cells = {(r["property"], r["target"]): r for r in json.loads((tmp_path / "conformance.json").read_text())["results"]}
    broken = [r for (_, t), r in cells.items() if t == str(target)]
    assert len(broken) == 3 and {r["result"] for r in broken} == {"fail"} and {r["kind"] for r in broken} == {"fail"}
    assert all(message in r["detail"] for r in broken), broken


def test_module_that_defines_nothing_is_skipped_by_name(pytester):
    target = hostile("defines_nothing.py")
    result = run_suites(pytester, [target], k=None, suites=ATTENTION_SUITES)
    n = sum(len(re.findall(r"^def test_\w+\(", s.read_text(), re.M)) for s in ATTENTION_SUITES)
    result.assert_outcomes(skipped=n)
    out = result.stdout.str()
    assert f"target {target!r} has no attribute 'scaled_dot_product_attention'" in out
    assert f"target {target!r} has no attribute 'sliding_window_attention'" in out
    assert "defines: no protocol names" in out


# ---- targets that load but misbehave when called: a failure per property, with a repro -------

CALL_FAILURES = [
    # (target, the message it must produce)
    ("raises.py", "raised ValueError: hostile target: this kernel supports no shapes at all"),
    ("wrong_shape.py", "scaled_dot_product_attention returned shape"),
    ("wrong_dtype.py", "scaled_dot_product_attention returned dtype torch.float64, expected"),
    ("returns_nan.py", "NaN where the reference is"),
    ("returns_tuple.py", "returned a tuple of 2; the protocol returns a single tensor"),
    ("mutates_inputs.py", "modified its input in place (argument 2)"),
]


@pytest.mark.parametrize("name,message", CALL_FAILURES, ids=[c[0].removesuffix(".py") for c in CALL_FAILURES])
def test_misbehaving_call_is_reported(pytester, name, message):
    target = hostile(name)
    result = run_suites(pytester, [target, "reference"])
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert message in out, f"expected {message!r}:\n{out[-4000:]}"
    assert_each_property_reported(result, target)
    if name != "returns_nan.py":  # NaN is a wrong answer, not a broken call
        assert "implementation error for target" in out
    assert out.count("repro:") >= 3
    assert_reference_unaffected(result)


def test_hanging_call_is_interrupted(pytester):
    target = hostile("hangs.py")
    result = run_suites(pytester, [target, "reference"], profile="hostile-one-call",
                        extra=("--impl-timeout", "1"))
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert "did not return within the per-call limit of 1 s (--impl-timeout)" in out
    assert_each_property_reported(result, target)
    assert out.count("implementation error for target") >= 3
    assert_reference_unaffected(result)


def test_sys_exit_does_not_end_the_session(pytester):
    """``sys.exit`` inside the target fails its properties, each named with a repro; the
    session and the other target go on."""
    target = hostile("exits.py")
    result = run_suites(pytester, [target, "reference"])
    result.assert_outcomes(passed=3, failed=3)
    assert "raised SystemExit: 3" in result.stdout.str()
    assert_each_property_reported(result, target)
    assert_reference_unaffected(result)
