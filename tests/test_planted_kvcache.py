"""The KV-cache suite catches real bugs: each planted-bug target in ``tests/planted/kvcache/``
fails exactly the property meant to catch it, with the property's name and a repro line.

Each case runs ONE suite test in-process (``-k``) under the derandomized ``ci`` profile. Controls:
``reference`` and the planted base (a correct kernel on torch SDPA) pass everything, the declared
w+1 rolling window passes with its convention named, and a kernel that declares no RoPE is
reported unsupported there, not failed. The caches a target writes in its worker come back.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from planted_support import (assert_caught, assert_declared_passes, conformance, property_of, run_suite,
                             suite_tests)

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "kvcache"
SUITE = "test_kvcache.py"

#: (planted target, the one suite test that must fail for it, what the failure must say)
BUGS = [
    ("stale_cache.py", "test_decode", ["must be written into the cache"]),
    ("chunk_not_causal.py", "test_chunked_prefill", ["against one causal call"]),
    ("rope_offset_ignored.py", "test_rotary", ["keys rotated at their positions"]),
    ("seqlens_off_by_one.py", "test_unfilled_slots", ["slots past cache_seqlens", "changed the output"]),
    ("rolling_w_plus_one.py", "test_rolling_window", ["convention mismatch", "window_extent: the code follows w+1"]),
    ("first_item_lengths.py", "test_ragged_lengths", ["batch item 1"]),
    ("mutates_query.py", "test_decode", ["implementation error", "modified its input in place (argument 0)"]),
]

#: targets that are not bugs: (file, tests that must pass, labels recorded)
DECLARED = [
    ("rolling_w_plus_one_declared.py", ["test_rolling_window"], {"kvcache.rolling_window": "convention:w+1"}),
]
UNSUPPORTED = "no_rotary_declared.py"


def test_table_is_consistent():
    """Every planted file is listed, each bug's docstring names its real pattern, and every
    kvcache property has a planted bug that it catches."""
    files = {p.name for p in PLANTED.glob("*.py") if not p.name.startswith("_")}
    listed = {b for b, _, _ in BUGS} | {d[0] for d in DECLARED} | {UNSUPPORTED}
    assert files == listed, f"unlisted: {sorted(files - listed)}; missing: {sorted(listed - files)}"
    for bug, test, _ in BUGS:
        assert test in suite_tests(SUITE), test
        doc = (PLANTED / bug).read_text()
        assert doc.startswith('"""Planted bug'), f"{bug}: module docstring must describe the bug"
        assert "Real pattern" in doc and "Caught by" in doc, f"{bug}: docstring lacks the real pattern"
    assert set(suite_tests(SUITE)) <= {t for _, t, _ in BUGS}, "a kvcache property without a planted bug"


@pytest.mark.parametrize("bug,test,messages", BUGS, ids=[b.removesuffix(".py") for b, _, _ in BUGS])
def test_planted_bug_is_caught(pytester, bug, test, messages):
    assert_caught(pytester, SUITE, PLANTED / bug, test, messages)


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


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference and the torch-SDPA base pass every kvcache property (the rolling window named w)."""
    report = tmp_path / "report"
    impls = ["reference", PLANTED / "_base.py"]
    result = run_suite(pytester, [SUITE], impls, None, "--conformance-report", str(report))
    result.assert_outcomes(passed=2 * len(suite_tests(SUITE)))
    cells = conformance(report)
    for target in ("reference", str(PLANTED / "_base.py")):
        for test in suite_tests(SUITE):
            cell = cells[(property_of(SUITE, test), target)]
            assert cell == "pass" or cell == "convention:w", (test, target, cell)


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_caches_written_by_the_target_come_back(isolation):
    """In the worker or here, the cache arguments are written where the caller sees them, and
    only they: the query, the new keys and cache_seqlens come back unmodified."""
    from harness.loader import load_target
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
