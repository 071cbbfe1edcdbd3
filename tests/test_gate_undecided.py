"""Points the gate cannot decide: CPU peak memory below the probe's resolution (issue 27) and times
too noisy for the gate's stated slowdown (issue 25). They are "undecided", counted in the summary,
never a regression, and fail the gate only with --strict. Recorded rows, no timing."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import main as cli
from harness.verdicts.gate_rule import GATE_SLOWDOWN, LEGACY_RESOLUTION_BYTES, UNDECIDED_RESOLUTION
from harness.reports import gate
from harness.reports.load import load_runs, point_samples, tidy
from tests.run_folders import _row, write

CPU_REFERENCE = Path(__file__).resolve().parents[1] / "reports" / "baselines" / "cpu-reference"
SDPA = {"batch": 1, "causal": False, "dtype": "float32", "head_dim": 64, "heads": 4}


def _folder(root: Path, name: str, rows: list[dict]) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "env.json").write_text(json.dumps({"hostname": "vm", "device_name": "cpu", "impl": "kernel.py",
                                              "suites": ["scaling"], "cases": None, "passes": ["fwd", "bwd"]}))
    write(run, rows)
    return run


def _issue_rows(name: str, peaks: dict[int, int | None], resolution: int | None = None) -> list[dict]:
    """The target's backward rows of issue 27's two runs (torch SDPA behind the protocol, as
    ``kernel.py``): ``peaks`` n -> the recorded median peak (the runs before the probe's resolution
    existed recorded no ``peak_mem_resolution_bytes``)."""
    rows = []
    for n, peak in peaks.items():
        t = 2e-3 * (n / 256) ** 2
        m = {"time_s": t, "time_iqr_s": 0.05 * t, "time_min_s": 0.95 * t, "repeats": 8, "calls_per_repeat": 1,
             "timer": "cpu_blocked_interleaved", "peak_mem_bytes": peak, "peak_mem_method": "rss_hwm_delta",
             "peak_mem_min_bytes": peak or 0, "peak_mem_max_bytes": peak or 0, "peak_mem_repeats": 5,
             "flops": 2.5 * 4 * n * n * 64 * 4, "tflops": 2.5 * 4 * n * n * 64 * 4 / t / 1e12}
        if resolution is not None:
            m["peak_mem_resolution_bytes"] = resolution
        rows.append(_row(name, "scaling", "target.sdpa", {**SDPA, "n": n, "pass": "bwd"}, m,
                         impl="kernel.py", role="target"))
    return rows


def report(run, baseline, *extra) -> int:
    out = run.parent / f"{run.name}_report"
    return cli(["report", str(run), "--baseline", str(baseline), "--out", str(out), "--formats", "csv,md",
                "--no-plots", *map(str, extra)])


def comparison(run) -> pd.DataFrame:
    return pd.read_csv(run.parent / f"{run.name}_report" / "comparison.csv")


def test_issue_27_zero_then_663552_bytes_is_undecided_not_a_regression(tmp_path, capsys):
    """The recorded pair: the backward at n = 512 read 0 B in the baseline run and 663,552 B in the
    next (n = 256: 135,168 then 323,584), the probe blind below ~1 MiB. The gate exited 1 on
    "ratio inf"; it must call it undecided (below resolution), count it, and exit 0."""
    old = _folder(tmp_path, "OLD", _issue_rows("OLD", {256: 135_168, 512: 0}))
    new = _folder(tmp_path, "NEW", _issue_rows("NEW", {256: 323_584, 512: 663_552}))
    assert report(new, old) == 0
    out = capsys.readouterr().out
    table = comparison(new)
    mem = table[table["metric"] == "peak_mem_bytes"].set_index("key")
    assert len(mem) == 2 and (mem["verdict"] == UNDECIDED_RESOLUTION).all(), mem
    at512 = mem.loc[[k for k in mem.index if '"n":512' in k][0]]
    assert at512["baseline"] == 0 and at512["current"] == 663_552
    assert f"< {LEGACY_RESOLUTION_BYTES} B" in at512["note"]
    assert "regression" not in set(table["verdict"])
    assert f"2 {UNDECIDED_RESOLUTION}" in out and "UNDECIDED (2 row(s) in scope" in out and "no regression" in out
    assert "gated time point(s) detect a slowdown of +25% (median" in out
    assert set(table[table["metric"] == "time_s"]["verdict"]) == {"ok"}  # the times were compared


def test_issue_27_pair_fails_only_under_strict(tmp_path, capsys):
    old = _folder(tmp_path, "OLD", _issue_rows("OLD", {512: 0}))
    new = _folder(tmp_path, "NEW", _issue_rows("NEW", {512: 663_552}))
    assert report(new, old, "--strict") == 1
    out = capsys.readouterr().out
    assert "failing the gate (--strict)" in out and "undecided point(s) fail the gate" in out
    assert report(new, old) == 0


def test_a_point_recorded_below_resolution_reads_so_and_is_never_compared(tmp_path):
    """A row of the new probe: ``peak_mem_bytes`` null with its resolution R. Against a baseline of
    either kind it is undecided; the report's tables say "below resolution (< R bytes)"."""
    r = 524_288
    old = _folder(tmp_path, "OLD", _issue_rows("OLD", {512: 2_621_440}, resolution=r))
    new = _folder(tmp_path, "NEW", _issue_rows("NEW", {512: None}, resolution=r))
    assert report(new, old) == 0
    mem = comparison(new).query("metric == 'peak_mem_bytes'")
    assert list(mem["verdict"]) == [UNDECIDED_RESOLUTION] and "the run is below resolution" in mem["note"].iloc[0]
    md = "\n".join(p.read_text() for p in (tmp_path / "NEW_report").glob("*.md"))
    assert f"below resolution (< {r} bytes)" in md
    # both measured above R, by the new probe: compared as before
    above = _folder(tmp_path, "ABOVE", _issue_rows("ABOVE", {512: 2_686_976}, resolution=r))
    assert report(above, old) == 0
    assert list(comparison(above).query("metric == 'peak_mem_bytes'")["verdict"]) == ["ok"]


def test_a_zero_byte_baseline_of_any_memory_metric_is_undecided():
    """0 B is not a measurement of a computation that allocates: not compared, on any device."""
    base = {"metrics": {"cache_bytes": 0.0, "peak_mem_bytes": 0.0}, "device": "cuda"}
    cur = {"metrics": {"cache_bytes": 4096.0, "peak_mem_bytes": 8.0 * 2 ** 20}, "device": "cuda"}
    rows = {r["metric"]: r for r in gate.metric_rows(base, cur)}
    assert rows["cache_bytes"]["verdict"] == rows["peak_mem_bytes"]["verdict"] == UNDECIDED_RESOLUTION


def test_the_stored_baseline_still_loads_and_passes_against_itself():
    """cpu-reference against itself: exit 0; its CPU peaks under the probe's resolution (the row's
    ``peak_mem_resolution_bytes``; the legacy 1 MiB for rows stored before it) or without a value
    are undecided, every other value compared."""
    rows = [json.loads(line) for f in CPU_REFERENCE.rglob("results.jsonl") for line in f.read_text().splitlines()]
    resolution = {r["key"]: r["metrics"]["peak_mem_resolution_bytes"] for r in rows
                  if "peak_mem_resolution_bytes" in r.get("metrics", {})}
    df = tidy(load_runs([CPU_REFERENCE]))
    result = gate.gate(df, df, scope="all")
    assert result.code == 0 and result.matched > 0
    mem = result.table[result.table["metric"] == "peak_mem_bytes"]
    # under: below the row's resolution, or no value (the probe said it could not resolve the point)
    under = mem[[pd.isna(b) or b < resolution.get(k, LEGACY_RESOLUTION_BYTES)
                 for k, b in zip(mem["key"], mem["baseline"])]]
    assert (under["verdict"] == UNDECIDED_RESOLUTION).all() and (mem.drop(under.index)["verdict"] == "ok").all()
    assert gate.gate(df, df, scope="all", strict=True).code == (1 if len(under) else 0)


# ---- issue 25: the spread rule, from recorded rows ------------------------------------------

def _points(name: str, factor: dict | None = None, iqr: float = 0.05, samples: bool = True) -> list[dict]:
    """Six target points (the target's forward and backward at three sizes) of a recorded run, each
    with 5 repeats spread by ``iqr`` around its median; ``factor`` (n, pass) -> a slowdown."""
    rows = []
    for pass_ in ("fwd", "bwd"):
        for n in (512, 1024, 2048):
            t = 1e-3 * (n / 256) ** 2 * (2.5 if pass_ == "bwd" else 1) * (factor or {}).get((n, pass_), 1.0)
            reps = [t * (1 + iqr * x) for x in (-1.0, -0.5, 0.0, 0.5, 1.0)]
            m = {"time_s": t, "time_iqr_s": iqr * t, "time_min_s": reps[0], "repeats": 5}
            if samples:
                m["time_samples_s"] = reps
            params = {**SDPA, "n": n} if pass_ == "fwd" else {**SDPA, "n": n, "pass": pass_}
            rows.append(_row(name, "scaling", "target.sdpa", params, m, impl="kernel.py", role="target"))
    return rows


def _gate(tmp_path, base_rows, run_rows, **kw):
    base, run = load_runs([_folder(tmp_path, "BASE", base_rows)]), load_runs([_folder(tmp_path, "RUN", run_rows)])
    return gate.gate(tidy(run), tidy(base), current_samples=point_samples(run),
                        baseline_samples=point_samples(base), **kw)


def _verdicts(result) -> dict[tuple[int, str], str]:
    t = result.table[result.table["metric"] == "time_s"]
    out = {}
    for key, v in zip(t["key"], t["verdict"]):
        params = json.loads(key.split("|", 2)[2])
        out[(params["n"], params.get("pass", "fwd"))] = v
    return out


def test_a_noisy_baseline_makes_points_undecided_not_ok_nor_red(tmp_path):
    """A baseline whose repeats spread 40 % (a busy machine) cannot detect a 1.5x slowdown (it
    allows 2 x 40 % = 80 %): an unchanged run is undecided (spread 40 %), counted, exit 0; and 1
    only with --strict."""
    result = _gate(tmp_path, _points("BASE", iqr=0.40), _points("RUN"))
    assert set(_verdicts(result).values()) == {"undecided (spread 40 %)"}
    assert result.code == 0 and gate.counts(result.table)["undecided (spread)"] == 6
    assert gate.gate(result.table.iloc[0:0], result.table.iloc[0:0]).code == 2  # nothing: exit 2
    strict = _gate(tmp_path / "s", _points("BASE", iqr=0.40), _points("RUN"), strict=True)
    assert strict.code == 1 and len(strict.undecided()) == 6


def test_a_slowed_target_is_caught_and_named_by_a_quiet_baseline(tmp_path):
    """1.5x slower forward and backward at n = 2048 (the other points unchanged, so the drift is 1):
    exactly the slowed points are regressions, with the rank test over the repeats confirming."""
    slow = {(2048, "fwd"): 1.5, (2048, "bwd"): 1.5}
    result = _gate(tmp_path, _points("BASE"), _points("RUN", slow))
    v = _verdicts(result)
    assert {k for k, x in v.items() if x == "regression"} == set(slow) and result.code == 1
    assert {x for k, x in v.items() if k not in slow} == {"ok"}
    notes = result.table[(result.table["metric"] == "time_s") & (result.table["verdict"] == "regression")]["note"]
    assert notes.str.contains("rank test p = 0.004").all() and notes.str.contains("detects >= \\+25%").all()


def test_a_slowdown_beyond_even_a_noisy_points_allowance_is_a_regression(tmp_path):
    """Spread 30 % (allowed 60 %, undecided when unchanged) and 2x slower: still red."""
    slow = {(2048, "bwd"): 2.0}
    v = _verdicts(_gate(tmp_path, _points("BASE", iqr=0.30), _points("RUN", slow, iqr=0.30)))
    assert v[(2048, "bwd")] == "regression"
    assert {x for k, x in v.items() if k not in slow} == {"undecided (spread 30 %)"}


def test_a_move_the_repeats_do_not_confirm_is_undecided(tmp_path):
    """+30 % on the median past the 25 % floor, but the run's repeats overlap the baseline's (one
    slow outlier-free run against a baseline with a slow tail): the rank test does not confirm it."""
    base = _points("BASE")
    run = copy.deepcopy(base)
    for rows, name in ((base, "BASE"), (run, "RUN")):
        for r in rows:
            r["run_id"] = name
    target = [r for r in run if r["params"]["n"] == 2048 and r["params"].get("pass") == "bwd"][0]
    btarget = [r for r in base if r["params"]["n"] == 2048 and r["params"].get("pass") == "bwd"][0]
    t = btarget["metrics"]["time_s"]
    btarget["metrics"]["time_samples_s"] = [0.9 * t, t, 1.0 * t, 1.5 * t, 1.6 * t]
    btarget["metrics"]["time_iqr_s"] = 0.08 * t  # the stored IQR (recorded) says quiet
    target["metrics"].update(time_s=1.3 * t, time_samples_s=[0.95 * t, 1.25 * t, 1.3 * t, 1.32 * t, 1.35 * t],
                             time_iqr_s=0.07 * t)
    v = _verdicts(_gate(tmp_path, base, run))
    assert v[(2048, "bwd")].startswith("undecided (spread")


def test_rows_without_stored_repeats_use_the_iqr_rule_alone(tmp_path):
    """A baseline stored before repeats were (cpu-reference): no rank test, the IQR rule decides."""
    slow = {(1024, "fwd"): 1.5}
    v = _verdicts(_gate(tmp_path, _points("BASE", samples=False), _points("RUN", slow)))
    assert v[(1024, "fwd")] == "regression" and GATE_SLOWDOWN["cpu"] == 0.5


@pytest.mark.parametrize("iqr, expected", [(0.05, 0.25), (0.20, 0.40), (0.30, 0.60)])
def test_a_row_records_the_slowdown_it_can_detect(iqr, expected):
    from harness.bench.store import make_row
    row = make_row("r", "scaling", "target.sdpa", "reference", "cpu", {"n": 512},
                   metrics={"time_s": 1.0, "time_iqr_s": iqr})
    assert row["metrics"]["time_detectable_slowdown"] == pytest.approx(expected)


def test_the_report_command_reads_the_stored_repeats(tmp_path):
    """End to end (every table format, Parquet too): the CLI's gate runs the rank test on the
    repeats the rows store, and names the slowed points."""
    slow = {(1024, "bwd"): 1.5}
    base, run = _folder(tmp_path, "BASE", _points("BASE")), _folder(tmp_path, "RUN", _points("RUN", slow))
    out = tmp_path / "rep"
    assert cli(["report", str(run), "--baseline", str(base), "--out", str(out), "--no-plots"]) == 1
    regs = pd.read_csv(out / "regressions.csv")
    assert list(regs["metric"]) == ["time_s"] and '"n":1024' in regs["key"][0] and "rank test p" in regs["note"][0]
    assert (out / "results.parquet").is_file()


def test_a_suite_that_moves_more_between_runs_has_its_own_floor():
    """The KV-cache decode's medians moved up to +31 % net of drift between quiet runs (10 runs,
    notes/MEASUREMENTS.md): +35 % there is within its floor, the same move of a scaling point is not."""
    from harness.verdicts.gate_rule import SUITE_TIME_FLOOR, time_floor
    assert time_floor("cpu", "kv_cache") == SUITE_TIME_FLOOR[("cpu", "kv_cache")] > time_floor("cpu", "scaling")
    assert time_floor("cuda:0", "kv_cache") == time_floor("cuda", "scaling")  # (measured on a CPU only)

    def pair(suite):
        base = {"suite": suite, "device": "cpu", "metrics": {"time_s": 1.0, "time_iqr_s": 0.02}}
        cur = {"suite": suite, "device": "cpu", "metrics": {"time_s": 1.35, "time_iqr_s": 0.02}}
        return {r["metric"]: r["verdict"] for r in gate.metric_rows(base, cur)}
    assert pair("kv_cache")["time_s"] == "ok" and pair("scaling")["time_s"] == "regression"
    from harness.bench.store import make_row
    row = make_row("r", "kv_cache", "gqa", "reference", "cpu", {"kv_heads": 4},
                   metrics={"time_s": 1.0, "time_iqr_s": 0.05}, role="target")
    assert row["metrics"]["time_detectable_slowdown"] == pytest.approx(SUITE_TIME_FLOOR[("cpu", "kv_cache")])


def _comparisons(name: str, factors) -> list[dict]:
    """Comparison-kernel forward rows (torch.sdpa.math at six sizes), each ``factors[i]`` slower."""
    sizes = (256, 368, 512, 720, 1024, 1456)
    return [_row(name, "scaling", "torch.sdpa.math", {**SDPA, "n": n},
                 {"time_s": 1e-3 * (n / 256) ** 2 * f, "time_iqr_s": 5e-5, "repeats": 5})
            for n, f in zip(sizes, factors)]


#: a busy run: the comparison kernels moved x1.0 ... x2.2 (drift x1.40, robust log sd 0.32: a
#: machine-noise bound of exp(3 x 0.32) = x2.64 net of drift); a quiet one: all x1.40
BUSY, STEADY = (1.0, 1.3, 1.7, 2.2, 1.1, 1.5), (1.4,) * 6


@pytest.mark.parametrize("comparisons, slowdown, expected", [
    (BUSY, 2.4, "undecided"),     # +71 % net of drift, within the run's own noise: not red
    (STEADY, 2.4, "regression"),  # the same move where the comparison kernels agree: red
    (BUSY, 5.0, "regression"),    # +257 % net: past the noise too
])
def test_a_busy_runs_machine_noise_makes_a_move_undecided_not_red(tmp_path, comparisons, slowdown, expected):
    """Issue 25's busy runs: under contention points move by different factors (6 of 10 runs of the
    unchanged reference failed on one or two of them). A time regression must also exceed
    NOISE_SIGMAS robust sd of the comparison kernels' log ratios in its group."""
    drifted = {(n, "fwd"): 1.4 for n in (512, 1024, 2048)}  # the forward group's drift (no bwd kernels here)
    run = _points("RUN", {**drifted, (1024, "fwd"): slowdown}) + _comparisons("RUN", comparisons)
    result = _gate(tmp_path, _points("BASE") + _comparisons("BASE", (1.0,) * 6), run)
    t = result.table
    row = t[(t["metric"] == "time_s") & (t["role"] == "target") & t["key"].str.contains('"n":1024}')].iloc[0]
    assert row["verdict"].startswith(expected), (row["verdict"], row["note"])
    assert ("machine noise" in row["note"]) == (expected == "undecided"), row["note"]
    assert result.code == (0 if expected == "undecided" else 1)


@pytest.mark.parametrize("machine, slowdown, expected", [
    (0.85, 1.15, "ok"),          # the kernels got faster, the target held its time: was "+35 % net of drift"
    (0.85, 1.60, "regression"),  # a slower target on that machine: red on its own ratio
    (1.40, 1.40 * 1.15, "ok"),   # a slower machine still excuses its share (net of drift)
    (1.40, 1.40 * 1.60, "regression"),
])
def test_the_drift_excuses_a_slower_machine_and_never_accuses(tmp_path, machine, slowdown, expected):
    """Issue 25, a quiet run: the backward comparison kernels ran x0.85 of the baseline's times and
    the unchanged target's backward at n = 256 x1.32, which "net of drift" read +55 % and failed the
    gate. Where the comparison kernels got faster (d < 1) a point is judged on its own ratio."""
    run = _points("RUN", {(1024, "fwd"): slowdown}) + _comparisons("RUN", (machine,) * 6)
    result = _gate(tmp_path, _points("BASE") + _comparisons("BASE", (1.0,) * 6), run)
    t = result.table
    row = t[(t["metric"] == "time_s") & (t["role"] == "target") & t["key"].str.contains('"n":1024}')].iloc[0]
    assert row["verdict"] == expected, (row["verdict"], row["note"])
    assert ("not held against it" in row["note"]) == (machine < 1), row["note"]
    assert result.code == (1 if expected == "regression" else 0)
