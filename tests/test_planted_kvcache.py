"""The KV-cache suites catch real bugs: each planted-bug target in ``tests/planted/kvcache/``
fails exactly the property meant to catch it, with the property's name and a repro line
(``test_kvcache.py``: linear and rolling caches; ``test_paged_kvcache.py``: paged caches, softcap, sinks).

Each case runs ONE suite test in-process (``-k``) under the derandomized ``ci`` profile. Controls:
``reference`` and the planted base (a correct kernel on torch SDPA) pass everything, the declared
w+1 rolling window passes with its convention named, and a kernel that declares no RoPE is
reported unsupported there, not failed. The caches a target writes in its worker come back.
A kernel that declares no paging, softcap or sinks, and one whose function lacks the parameters,
get those properties reported unsupported.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from planted_support import assert_declared_passes, conformance, property_of, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "kvcache"
SUITE = "test_kvcache.py"


#: targets that are not bugs: (file, tests that must pass, labels recorded)
DECLARED = [
    ("rolling_w_plus_one_declared.py", ["test_rolling_window"], {"kvcache.rolling_window": "convention:w+1"}),
]
UNSUPPORTED = "no_rotary_declared.py"

PAGED_SUITE = "test_paged_kvcache.py"
#: kernels without the paged cache, softcap and sinks: declared, or a signature without them
PAGED_UNSUPPORTED = {"no_paging_declared.py": "declared: a paged cache (block_table)",
                     "old_signature.py": "declared: attention_with_kvcache takes no 'block_table' parameter"}


@pytest.mark.parametrize("planted", sorted(PAGED_UNSUPPORTED))
def test_paging_softcap_sinks_unsupported_are_not_failures(pytester, tmp_path, planted):
    """Declared, or absent from the signature: every paged/softcap/sinks property is reported
    unsupported with the reason, and the linear decode still passes."""
    report = tmp_path / "report"
    target = PLANTED / planted
    # (-k: "test_paged_", not "paged", which a checkout's path may hold)
    result = run_suite(pytester, [PAGED_SUITE, SUITE], [target],
                       "test_paged_ or test_softcap or test_sinks or test_decode", "--conformance-report", str(report))
    paged = suite_tests(PAGED_SUITE)
    result.assert_outcomes(passed=1, skipped=len(paged))
    cells = conformance(report)
    for test in paged:
        cell = cells[(property_of(PAGED_SUITE, test), str(target))]
        assert cell.startswith("unsupported (declared:"), (test, cell)
    assert PAGED_UNSUPPORTED[planted] in cells[(property_of(PAGED_SUITE, "test_paged_writes"), str(target))]
    assert cells[("kvcache.decode", str(target))] == "pass"


@pytest.mark.parametrize("planted,tests,labels", DECLARED, ids=[d[0].removesuffix(".py") for d in DECLARED])
def test_declared_convention_passes(pytester, tmp_path, planted, tests, labels):
    assert_declared_passes(pytester, tmp_path / "report", SUITE, PLANTED / planted, tests, labels)


def test_declared_unsupported_rotary_is_not_a_failure(pytester, tmp_path):
    report = tmp_path / "report"
    target = PLANTED / UNSUPPORTED
    result = run_suite(pytester, [SUITE], [target], "test_rotary or test_decode", "--conformance-report", str(report))
    result.assert_outcomes(passed=1, skipped=1)
    cells = conformance(report)
    assert cells[("kvcache.rotary", str(target))].startswith("unsupported (declared:"), cells
    assert cells[("kvcache.decode", str(target))] == "pass"


@pytest.mark.parametrize("suite", [SUITE, PAGED_SUITE])
def test_correct_targets_pass_everything(pytester, tmp_path, suite):
    """reference and the torch-SDPA base pass every kvcache property (the rolling window named w)."""
    report = tmp_path / "report"
    impls = ["reference", PLANTED / "_base.py"]
    result = run_suite(pytester, [suite], impls, None, "--conformance-report", str(report))
    result.assert_outcomes(passed=2 * len(suite_tests(suite)))
    cells = conformance(report)
    for target in ("reference", str(PLANTED / "_base.py")):
        for test in suite_tests(suite):
            cell = cells[(property_of(suite, test), target)]
            assert cell == "pass" or cell == "convention:w", (test, target, cell)


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_caches_written_by_the_target_come_back(isolation):
    """In the worker or here, the cache arguments are written where the caller sees them, and
    only they: the query, the new keys and cache_seqlens come back unmodified."""
    from harness.boundary.loader import load_target
    from harness.runner import impl
    target = load_target("reference", isolation=isolation, timeout=60)
    try:
        q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 5)
        kc, vc = torch.zeros(2, 1, 8, 4), torch.zeros(2, 1, 8, 5)
        lens = torch.tensor([0, 4], dtype=torch.int32)
        kept = [t.clone() for t in (q, k, v, lens)]
        out = impl(target, "attention_with_kvcache")(q, kc, vc, k=k, v=v, cache_seqlens=lens)
        assert out.shape == (2, 2, 3, 5)
        assert torch.equal(kc[0, :, 0:3], k[0]) and torch.equal(kc[1, :, 4:7], k[1])
        assert torch.equal(vc[1, :, 4:7], v[1]) and not vc[1, :, :4].any() and not kc[0, :, 3:].any()
        assert all(torch.equal(a, b) for a, b in zip((q, k, v, lens), kept))
    finally:
        target.close()
