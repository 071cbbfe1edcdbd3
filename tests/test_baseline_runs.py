"""A baseline of several runs (reports/baseline_runs.py, issue 25): each point's between-run
spread joins its repeats' spread, so a point that moves between quiet runs is undecided, not red,
while a steady one still catches a 1.5x slowdown. Recorded rows, no timing."""
from __future__ import annotations

import pytest

from harness.reports import gate
from harness.reports.baseline_runs import D2, IQR_PER_SD, between_run_spread, combined
from harness.reports.load import load_runs, point_samples, tidy
from test_gate_undecided import _folder, _points, _verdicts

BWD_512 = (512, "bwd")


def _baseline(tmp_path, factors: list[dict]):
    """A baseline folder: the first run at its top, the others in sub-folders (as stored)."""
    root = _folder(tmp_path, "BASE", _points("BASE", factors[0]))
    for i, f in enumerate(factors[1:], start=2):
        _folder(root, f"quiet-{i}", _points(f"quiet-{i}", f))
    return root


def _judge(tmp_path, base_root, run_factor: dict):
    base = load_runs([base_root])
    run = load_runs([_folder(tmp_path, "RUN", _points("RUN", run_factor))])
    return gate.gate(tidy(run), tidy(base), current_samples=point_samples(run), baseline_samples=point_samples(base))


def test_between_run_spread_is_on_the_scale_of_an_iqr():
    assert between_run_spread([1.0]) == 0.0 and between_run_spread([2.0, 2.0, 2.0]) == 0.0
    assert between_run_spread([0.9, 1.0, 1.1]) == pytest.approx(IQR_PER_SD * 0.2 / D2[3])
    many = [1.0 + 0.01 * i for i in range(12)]  # (more runs than the range table: their IQR)
    assert 0 < between_run_spread(many) < between_run_spread([1.0, 1.11])


def test_a_point_that_moved_between_the_baselines_runs_is_undecided_not_red(tmp_path):
    """The issue's quiet runs: a backward point came back x1.0, x1.5, x1.0 (its repeats spread
    5 % each time). A run with it at x1.5 again is no regression: the point cannot detect the
    gate's 1.5x, so it is undecided; the steady points stay ok."""
    root = _baseline(tmp_path, [{}, {BWD_512: 1.5}, {}])
    v = _verdicts(_judge(tmp_path, root, {BWD_512: 1.5}))
    assert v[BWD_512].startswith("undecided (spread"), v
    assert {x for k, x in v.items() if k != BWD_512} == {"ok"}
    # the same run against the first run alone: red (what the gate said before)
    alone = _verdicts(_judge(tmp_path / "alone", _folder(tmp_path / "alone", "ONE", _points("ONE")), {BWD_512: 1.5}))
    assert alone[BWD_512] == "regression"


def test_a_steady_point_of_a_multi_run_baseline_still_catches_a_slowdown(tmp_path):
    """Three runs within 2 % of each other: a 1.5x slower point is red, the rank test run over the
    run's repeats against the three runs' pooled repeats, and the note says what it was judged on."""
    root = _baseline(tmp_path, [{}, {(1024, "fwd"): 1.02}, {(1024, "fwd"): 0.99}])
    result = _judge(tmp_path, root, {(1024, "fwd"): 1.5})
    v = _verdicts(result)
    assert v[(1024, "fwd")] == "regression" and result.code == 1
    assert {x for k, x in v.items() if k != (1024, "fwd")} == {"ok"}
    t = result.table
    note = t[(t["metric"] == "time_s") & (t["verdict"] == "regression")]["note"].iloc[0]
    assert "baseline: 3 runs, between-run spread 2%" in note and "rank test p = " in note
    p = float(note.split("rank test p = ")[1].split(";")[0])
    assert p < 0.004  # (5 repeats against 15 pooled: a smaller p than one run's 5 can reach)


def test_combined_takes_medians_pools_repeats_and_skips_failed_runs():
    def point(t, status="ok", iqr=0.05):
        return {"status": status, "metrics": {"time_s": t, "time_iqr_s": iqr * t, "time_min_s": 0.9 * t},
                "samples": {"time_samples_s": [t, t]}}
    c = combined([point(1.0), point(3.0), point(2.0), point(9.0, status="error")])
    assert c["metrics"]["time_s"] == 2.0 and c["metrics"]["time_min_s"] == 0.9 and c["runs"] == 3
    assert c["metrics"]["time_iqr_s"] == pytest.approx(2.0 * between_run_spread([1.0, 2.0, 3.0]))
    assert sorted(c["samples"]["time_samples_s"]) == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    one = combined([point(1.0, status="error"), point(4.0)])
    assert one["metrics"]["time_s"] == 4.0 and "runs" not in one
    steady = combined([point(1.0, iqr=0.2), point(1.0, iqr=0.1)])  # (their own spread when larger)
    assert steady["metrics"]["time_iqr_s"] == pytest.approx(0.15)
