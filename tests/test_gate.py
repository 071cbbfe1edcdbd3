"""The baseline gate passes only on what it compared: corrupt run folders and baselines as fixtures
(tests/run_folders.py writes them by hand to the schema), each with its documented exit status --
1 a regression in scope, 2 an input error or nothing to compare -- and a clean rerun exits 0."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from harness.cli import main as cli
from harness.reports import decide, gate
from harness.reports.load import load_runs, tidy
from tests.run_folders import NS, _row, make_run, read, write, write_pytest_benchmark


def report(run, baseline, *extra) -> int:
    out = run.parent / f"{run.name}_report"
    return cli(["report", str(run), "--baseline", str(baseline), "--out", str(out), "--formats", "csv",
                "--no-plots", *map(str, extra)])


def regs(run):
    return pd.read_csv(run.parent / f"{run.name}_report" / "regressions.csv")


def comparison(run):
    return pd.read_csv(run.parent / f"{run.name}_report" / "comparison.csv")


def _times(r, factor, case=None, n=None):
    """Row ``r`` with its time ``factor`` times longer if it is a timed scaling point of ``case``
    (any) at ``n`` (any)."""
    m = r["metrics"]
    if r["suite"] == "scaling" and m.get("time_s") and case in (None, r["case"]) and n in (None, r["params"]["n"]):
        m.update(time_s=m["time_s"] * factor, time_iqr_s=m["time_iqr_s"] * factor, tflops=m["tflops"] / factor)
    return r


def edit(run, fn):
    """Rewrite every row of ``run`` through ``fn(row) -> row or None (dropped)``."""
    write(run, [r for r in map(fn, read(run)) if r is not None])
    return run


@pytest.fixture
def base(tmp_path):
    return make_run(tmp_path, "base")


def test_clean_rerun_exits_0(tmp_path, base, capsys):
    assert report(make_run(tmp_path, "rerun"), base) == 0
    out = capsys.readouterr().out
    assert "no regression" in out and "gate: --cases target (default)" in out


@pytest.mark.parametrize("value", [math.nan, None])
def test_times_that_are_nan_or_null_are_regressions(tmp_path, base, value):
    def blank(r):
        if "time_s" in r["metrics"]:
            r["metrics"].update(time_s=value, tflops=value)
        return r
    run = edit(make_run(tmp_path, "run"), blank)
    assert report(run, base) == 1
    r = regs(run)
    assert set(r["metric"]) == {"time_s", "tflops"} and r["note"].str.contains("no value now").all()
    assert len(r) == 2 * 5 and set(r["case"]) == {"target.sdpa"}  # the target's timed points
    assert report(run, base, "--cases", "all") == 1
    assert len(regs(run)) == 2 * 14  # every timed point (15 scaling points, one oom in both)


@pytest.mark.parametrize("metric, scope", [("cache_bytes", "target"), ("cache_formula_bytes", "target"),
                                           ("receptive_field", "all")])  # the fixture's rf rows: banded
def test_a_nan_exact_metric_is_a_regression(tmp_path, base, metric, scope):
    def blank(r):
        if metric in r["metrics"]:
            r["metrics"][metric] = math.nan
        return r
    run = edit(make_run(tmp_path, "run"), blank)
    assert report(run, base, "--cases", scope) == 1
    assert set(regs(run)["metric"]) == {metric}


def test_half_the_rows_missing_is_a_regression_unless_allowed(tmp_path, base):
    """What a kill leaves: the first half of the points."""
    run = make_run(tmp_path, "run")
    rows = read(run)
    write(run, rows[: len(rows) // 2])
    lost = rows[len(rows) // 2:]
    assert report(run, base) == 1
    r = regs(run)
    assert (r["metric"] == "point").sum() == sum(x["role"] == "target" for x in lost) > 0
    assert r["note"].str.contains("missing").all()
    assert report(run, base, "--cases", "all") == 1 and len(regs(run)) == len(lost)
    assert report(run, base, "--allow-missing") == 0
    assert (comparison(run)["verdict"] == "missing").sum() == len(rows) - len(rows) // 2


def test_a_point_skipped_now_counts_as_missing(tmp_path, base):
    run = make_run(tmp_path, "run", status={("target.sdpa", 512): ("skipped", "time budget: spent")})
    assert report(run, base) == 1
    assert regs(run)["note"].str.contains("ok -> skipped").all()
    assert report(run, base, "--allow-missing") == 0


def test_a_size_cap_that_follows_the_machines_speed_is_reported_not_gated(tmp_path, base):
    cap = "size cap: predicted 1.30 s per call at n=4096 (n^2 from 0.65 s at n=2048), over the budget"
    run = make_run(tmp_path, "run", status={("banded_window", 4096): ("skipped", cap)})
    assert report(run, base) == 0
    table = comparison(run)
    assert table[table["verdict"] == "skipped (size cap)"]["key"].str.contains('"n":4096').all()


@pytest.mark.parametrize("where", ["run", "baseline"])
def test_unknown_status_is_an_input_error(tmp_path, base, where, capsys):
    run = make_run(tmp_path, "run")
    edit(run if where == "run" else base, lambda r: {**r, "status": "banana"} if r["case"] == "mha" else r)
    assert report(run, base) == 2
    assert "unknown status 'banana'" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    (lambda r: {k: v for k, v in r.items() if k != "role"}, "python -m harness migrate"),
    (lambda r: {**r, "role": "kernel"}, "unknown role 'kernel'"),
    (lambda r: {**r, "params": [1, 2]}, "'params' must be an object"),
    (lambda r: {**r, "metrics": "fast"}, "'metrics' must be an object"),
])
def test_malformed_rows_are_input_errors(tmp_path, base, change, message, capsys):
    run = edit(make_run(tmp_path, "run"), lambda r: change(r) if r["case"] == "gqa" else r)
    assert report(run, base) == 2
    err = capsys.readouterr().err
    assert message in err and "results.jsonl:" in err


def test_empty_baseline_against_a_100x_slower_run_is_an_input_error(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("")
    assert report(make_run(tmp_path, "run", slow=100.0), empty) == 2
    assert "holds no result rows" in capsys.readouterr().err


def test_a_baseline_without_values_compares_nothing(tmp_path, capsys):
    """Every baseline metric null: nothing to compare, not a pass."""
    base = edit(make_run(tmp_path, "base"), lambda r: {**r, "metrics": {k: None for k in r["metrics"]}})
    assert report(make_run(tmp_path, "run", slow=100.0), base) == 2
    assert "nothing to compare" in capsys.readouterr().err


def test_pytest_benchmark_json_overlapping_nothing_is_an_input_error(tmp_path, base, capsys):
    bench = write_pytest_benchmark(tmp_path / "bench.json")
    assert report(bench, base) == 2
    assert "nothing to compare" in capsys.readouterr().err
    assert report(bench, bench) == 0


def test_a_users_kernel_is_never_compared_with_the_reference(tmp_path, base, capsys):
    """Same case names, same params: the target rows are keyed by the target, so a user's kernel
    ten times faster than the reference is no "improvement" and a slower one no regression."""
    mine = make_run(tmp_path, "mine", impl="kernels/my_attn.py", slow=0.1)
    assert report(mine, base) == 2
    assert "the run's target rows are of my_attn.py, the baseline's of reference" in capsys.readouterr().err
    table = comparison(mine)
    target = table[table["role"] == "target"]
    assert set(target["verdict"]) <= {"new", "missing"} and target["key"].str.contains("@").all()
    assert not table[table["verdict"].isin(["improvement", "regression"])]["role"].eq("target").any()
    # --cases all gates everything: the reference's target points are missing from this run
    assert report(mine, base, "--cases", "all") == 1
    assert set(regs(mine)["metric"]) == {"point"} and regs(mine)["key"].str.contains("@reference").all()


def test_a_users_kernel_against_its_own_baseline(tmp_path, capsys):
    """A baseline stored from ~/src/my_attn.py still matches CI's /builds/x/my_attn.py."""
    own = make_run(tmp_path, "own", impl="/home/me/src/my_attn.py")
    assert report(make_run(tmp_path, "again", impl="/builds/x/my_attn.py"), own) == 0
    assert "gate: --cases target (default)" in capsys.readouterr().out
    slower = edit(make_run(tmp_path, "slower", impl="my_attn.py"), lambda r: _times(r, 2.0, "target.sdpa", 1024))
    assert report(slower, own) == 1
    assert set(regs(slower)["case"]) == {"target.sdpa"} and set(regs(slower)["metric"]) == {"time_s", "tflops"}


def test_comparison_kernels_and_drift_are_reported_not_gated_for_a_user(tmp_path, capsys):
    """A kernel author's CI is not red for the harness's banded kernel or the machine's mood."""
    own = make_run(tmp_path, "own", impl="my_attn.py")
    # (one size: the synthetic run has two comparison kernels, which measure the machine's drift, so
    # a banded kernel 3x slower at every size would be half of them)
    banded = edit(make_run(tmp_path, "banded", impl="my_attn.py"), lambda r: _times(r, 3.0, "banded_window", NS[-1]))
    assert report(banded, own) == 0
    table = comparison(banded)
    ungated = table[table["verdict"] == gate.UNGATED]
    assert set(ungated["case"]) == {"banded_window"} and not ungated["gated"].any()
    assert "outside the gate" in capsys.readouterr().out
    assert report(banded, own, "--cases", "all") == 1
    busy = edit(make_run(tmp_path, "busy", impl="my_attn.py"), lambda r: _times(r, 2.0))  # all 2x slower
    assert report(busy, own) == 0
    drift = comparison(busy)
    drift = drift[drift["metric"] == "time_s:suite_median"]
    # (the suites that time only the target, kv_cache and finetune, take the scaling suite's
    # comparison kernels as the machine's drift)
    assert (drift["verdict"] == gate.UNGATED).all() and "scaling" in set(drift["suite"])
    assert report(busy, own, "--cases", "all") == 1


def test_suites_and_cases_the_run_did_not_ask_for_are_not_missing(tmp_path, base):
    run = make_run(tmp_path, "run", env_extra={"suites": ["scaling", "receptive_field"], "cases": None})
    edit(run, lambda r: r if r["suite"] in ("scaling", "receptive_field") else None)
    assert report(run, base) == 0
    table = comparison(run)
    assert set(table[table["verdict"] == "not requested"]["suite"]) == {"kv_cache", "finetune"}
    only = make_run(tmp_path, "only", env_extra={"suites": ["scaling"], "cases": ["target.sdpa"]})
    edit(only, lambda r: r if r["case"] == "target.sdpa" and r["suite"] == "scaling" else None)
    assert report(only, base) == 0
    assert report(only, base, "--cases", "all") == 0  # the comparison kernels: not requested either
    # the same run folder cut short (a kill) still asked for everything it lacks
    cut = make_run(tmp_path, "cut", env_extra={"suites": ["scaling", "kv_cache"]})
    edit(cut, lambda r: r if r["suite"] == "scaling" else None)
    assert report(cut, base) == 1 and set(regs(cut)["suite"]) == {"kv_cache"}


def _mem(run, values):
    """Give every scaling point the memory repeats ``values`` (bytes) around its own peak."""
    def put(r):
        m = r["metrics"]
        if "peak_mem_bytes" in m:
            peaks = sorted(m["peak_mem_bytes"] * v for v in values)
            m.update(peak_mem_bytes=peaks[len(peaks) // 2], peak_mem_min_bytes=peaks[0],
                     peak_mem_max_bytes=peaks[-1], peak_mem_repeats=len(peaks))
        return r
    return edit(run, put)


def test_cpu_memory_allowance_follows_the_measured_spread(tmp_path):
    """banded_window's RSS peak moved 62 -> 74..90 MiB between runs of the same code, and within one
    run 58..90 MiB: with that spread recorded the gate allows it; without, it is a regression."""
    quiet_base = _mem(make_run(tmp_path, "quiet_base"), [1.0, 1.0, 1.0])
    noisy_base = _mem(make_run(tmp_path, "noisy_base"), [0.94, 1.0, 1.2, 1.3, 1.45])
    run = _mem(make_run(tmp_path, "run"), [1.3, 1.45, 1.45])  # +45 %
    assert report(run, noisy_base) == 0
    assert report(run, quiet_base) == 1
    assert set(regs(run)["metric"]) == {"peak_mem_bytes"}
    bm = {"peak_mem_bytes": 62 * 2 ** 20, "peak_mem_min_bytes": 58 * 2 ** 20, "peak_mem_max_bytes": 90 * 2 ** 20}
    assert decide.tolerance("peak_mem_bytes", bm, "cpu") == pytest.approx(2 * 32 / 62)
    # the run's own spread counts too: a quiet baseline, a noisy run
    cm = {"peak_mem_bytes": 70.0, "peak_mem_min_bytes": 60.0, "peak_mem_max_bytes": 88.0}
    quiet = {"peak_mem_bytes": 1e9}
    assert decide.tolerance("peak_mem_bytes", quiet, "cpu", cm) == pytest.approx(2 * 28 / 70)
    assert decide.tolerance("peak_mem_bytes", quiet, "cpu") == decide.FLOOR["peak_mem_bytes"]


def test_gate_exit_codes_directly(tmp_path):
    base = tidy(load_runs([make_run(tmp_path, "b")]))
    same = gate.gate(tidy(load_runs([make_run(tmp_path, "s")])), base)
    assert same.code == 0 and same.matched > 0 and same.problem() is None
    mine = gate.gate(tidy(load_runs([make_run(tmp_path, "m", impl="x.py")])), base, scope="target")
    assert mine.code == 2 and mine.matched == 0 and "x.py" in mine.problem()
    with pytest.raises(ValueError):
        gate.gate(base, base, scope="everything")


def test_a_run_being_written_is_reported_with_a_warning(tmp_path, base, capsys):
    from harness.verdicts.runfolder import FolderLock
    run = make_run(tmp_path, "run")
    lock = FolderLock(run, ["bench", "--out", str(run)])
    try:
        assert report(run, base) == 0
        assert "still being written" in capsys.readouterr().err
    finally:
        lock.release()
    json.loads(json.dumps(_row("r", "s", "c", {}, {})))  # the helper writes valid rows


def _with_backward(run, factor=1.0):
    """``run`` with a backward copy of each scaling row (``pass`` "bwd"), ``factor`` times slower."""
    import copy

    from harness.verdicts.runfolder import point_key
    rows = read(run)
    for r in [r for r in rows if r["suite"] == "scaling"]:
        b = copy.deepcopy(r)
        b["params"]["pass"] = "bwd"
        b["key"] = point_key(b["suite"], b["case"], b["params"], b["role"], b["impl"])
        rows.append(_times(b, factor))
    write(run, rows)
    return run


def test_each_pass_has_its_own_drift(tmp_path):
    """The backward is its own workload: a machine whose every backward point runs 1.6x slower while
    the forward is unchanged is drift of the backward (one ungated row), not a regression of each
    backward point, and the forward points keep their own drift of 1."""
    base = _with_backward(make_run(tmp_path, "base"))
    slow = _with_backward(make_run(tmp_path, "slow"), factor=1.6)
    assert report(slow, base) == 0
    drift = comparison(slow)
    drift = drift[drift["metric"] == "time_s:suite_median"].set_index("key")
    assert drift.loc["scaling|*:bwd", "verdict"] == gate.UNGATED
    assert drift.loc["scaling|*", "verdict"] == "ok"
    one = edit(_with_backward(make_run(tmp_path, "one")),  # one target backward point 1.6x: a regression
               lambda r: _times(r, 1.6, "target.sdpa", 1024) if r["params"].get("pass") == "bwd" else r)
    assert report(one, base) == 1


def test_a_uniformly_slower_target_does_not_hide_in_the_drift(tmp_path):
    """Every row of the target's own code 2x slower, the comparison kernels unchanged: the drift is
    measured on the comparison kernels, so it stays ~1 and every slowed target point is a regression.
    (Before issue 25 the drift was the median over all points, the target's included.)"""
    own = make_run(tmp_path, "own", impl="my_attn.py")

    def slow_target(r):
        return _times(r, 2.0) if r.get("role") == "target" else r
    slower = edit(make_run(tmp_path, "slower", impl="my_attn.py"), slow_target)
    assert report(slower, own) == 1
    table = comparison(slower)
    drift = table[table["metric"] == "time_s:suite_median"]
    assert (drift["ratio"].sub(1.0).abs() < 0.05).all()
    assert drift["note"].str.contains("comparison kernels").all()
    slowed = {r["case"] for r in read(slower)
              if r["suite"] == "scaling" and r.get("role") == "target" and r.get("status") == "ok"}
    assert set(regs(slower)["case"]) == slowed
