"""Bugs that only two options together expose (issue 43): each planted target in
``tests/planted/pairwise/`` fails its ``options_together`` property (the covering set,
``suites.pairwise``) under the derandomized ci profile, with the property's name and a repro line,
while the properties of each of its two options alone pass it. The covering sets themselves
(every pair of values meets, every option joins) are ``tests/test_pairwise.py``'s.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from planted_support import assert_caught, conformance, property_of, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "pairwise"

#: (planted target, suite, the options_together test that catches it, what the failure says,
#:  the single-option properties (suite, -k expression) that pass it: the bug needs both options)
BUGS = [
    ("kvcache_paged_rotary_page_offset.py", "test_kvcache_pairwise.py", "test_kvcache", ["pages of"],
     ("test_kvcache.py", "test_rotary"), ("test_paged_kvcache.py", "test_paged_agreement")),
    ("kvcache_rolling_gqa_round_robin.py", "test_kvcache_pairwise.py", "test_kvcache", ["window 5"],
     ("test_kvcache.py", "test_decode")),
    ("kvcache_sink_capped.py", "test_kvcache_pairwise.py", "test_kvcache", ["softcap", "sinks"],
     ("test_paged_kvcache.py", "test_softcap or test_sinks")),
    ("varlen_sink_capped.py", "test_options_together.py", "test_varlen", ["softcap", "sinks"],
     ("test_varlen.py", "test_softcap or test_sinks")),
    ("sdpa_causal_drops_scale.py", "test_options_together.py", "test_sdpa", ["is_causal", "scale"],
     ("test_attention.py", "test_scale"), ("test_attention_masks.py", "test_causal")),
    ("sdpa_tail_tile_first_item.py", "test_options_together.py", "test_sdpa", ["against the float64 reference"],
     ("test_attention.py", "test_agreement")),
    ("swa_full_window_drops_scale.py", "test_options_together.py", "test_sliding_window", ["window"],
     ("test_sliding_window.py", "test_window_extent")),  # (sliding_window.window_agreement draws scale 0.5 with
    #                                                         windows past S: it catches this one too)
]


def test_table_is_consistent():
    """Every planted file is listed, names its real pattern and the property that catches it, and
    each options_together property has at least one planted bug."""
    files = {p.name for p in PLANTED.glob("*.py")}
    assert files == {b[0] for b in BUGS}
    for bug, suite, test, *_ in BUGS:
        assert test in suite_tests(suite), (suite, test)
        doc = (PLANTED / bug).read_text()
        assert doc.startswith('"""Planted bug') and "Real pattern" in doc, bug
        assert f"Caught by: {property_of(suite, test)}" in doc, bug
    for suite in ("test_kvcache_pairwise.py", "test_options_together.py"):
        assert set(suite_tests(suite)) <= {b[2] for b in BUGS if b[1] == suite}, f"{suite}: a property without a bug"


@pytest.mark.parametrize("bug,suite,test,messages", [b[:4] for b in BUGS], ids=[b[0][:-3] for b in BUGS])
def test_two_option_bug_is_caught(pytester, bug, suite, test, messages):
    assert_caught(pytester, suite, PLANTED / bug, test, messages)


@pytest.mark.parametrize("bug,alone", [(b[0], b[4:]) for b in BUGS], ids=[b[0][:-3] for b in BUGS])
def test_each_option_alone_passes_it(pytester, tmp_path, bug, alone):
    """The bug is one of two options together: the properties of each option alone pass it (so no
    property before the covering sets could catch it, at the ci profile's seeds)."""
    for i, (suite, k) in enumerate(alone):
        report = tmp_path / f"report{i}"
        result = run_suite(pytester, [suite], [PLANTED / bug], k, "--conformance-report", str(report))
        assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-3000:]
        assert any(cell.startswith(("pass", "convention")) for cell in conformance(report).values())
