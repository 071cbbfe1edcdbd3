"""The conformance-time benchmark (harness/bench/conformance_time.py): its summary judges the
isolation overhead and the time per target from the measured rows (no timing assertion here:
the rows are made up), and it parses a pytest session line."""
from __future__ import annotations

from types import SimpleNamespace

from harness.bench import conformance_time as ct


def _row(ratio, t):
    return {"suite": ct.SUITE, "status": "ok",
            "metrics": {"overhead_ratio": ratio, "time_s": t, "time_none_s": t / ratio}}


def test_summary_passes_within_the_limits_and_fails_past_them():
    ok = ct.summary(SimpleNamespace(), [_row(1.2, 30.0)])
    assert [c.passed for c in ok] == [True, True]
    slow = ct.summary(SimpleNamespace(), [_row(2.0, 90.0)])
    assert [c.passed for c in slow] == [False, False]
    assert "2.00x" in slow[0].detail and "limit 1.5x" in slow[0].detail


def test_summary_without_a_point_cannot_be_evaluated():
    (check,) = ct.summary(SimpleNamespace(), [{"suite": ct.SUITE, "status": "error"}])
    assert check.passed is None


def test_session_line_is_parsed():
    m = ct._SESSION.search("89 passed, 65 skipped in 187.23s (0:03:07)")
    assert m and float(m.group(1)) == 187.23
