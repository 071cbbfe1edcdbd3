"""The report side (reports/*, ``python -m harness report``) on synthetic run folders written by
hand to the schema in notes/RESULTS_SCHEMA.md (tests/run_folders.py; no dependency on the bench
code). The gate's refusals (corrupt runs and baselines) are in tests/test_gate.py."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.verdicts import gate_rule
from harness.cli import main as cli
from harness.reports import decide, gate, tables
from harness.reports.load import InputError, load_runs, tidy
from tests.run_folders import NS, _row, key_of, make_run, write_pytest_benchmark  # noqa: F401

def report(*args) -> int:
    return cli(["report", *map(str, args)])


def test_load_and_merge_two_runs(tmp_path):
    resumed = _row("a", "scaling", "banded_window", {"n": 8192, "window": 128}, {}, "error", "boom")
    redone = _row("a", "scaling", "banded_window", {"n": 8192, "window": 128}, {"time_s": 0.05})
    a = make_run(tmp_path, "a", host="hostA", extra_rows=[resumed, redone])
    b = make_run(tmp_path, "b", host="hostB")
    df = tidy(load_runs([a, b]))
    assert set(df["run_id"]) == {"a", "b"}
    assert set(df["machine"]) == {"hostA/cpu", "hostB/cpu"}
    for col in ("n", "window", "kv_heads", "depth", "status", "reason", "metric", "value"):
        assert col in df.columns
    assert str(df["n"].dtype) == "Int64"
    assert not df.duplicated(["run_id", "key", "metric"]).any()
    oom = df[(df["status"] == "oom")]
    assert len(oom) == 2 and oom["metric"].isna().all() and (oom["reason"] == "needs 4 GiB").all()
    last = df[(df["run_id"] == "a") & (df["n"] == 8192)]
    assert set(last["status"]) == {"ok"} and last["value"].tolist() == [0.05]  # the rerun wins
    acc = df[(df["suite"] == "finetune") & (df["metric"] == "accuracy_ci95_lo")]
    assert len(acc) == 4


def test_tables_written_and_round_trip(tmp_path):
    df = tidy(load_runs([make_run(tmp_path, "a"), make_run(tmp_path, "b", host="hostB")]))
    out = tmp_path / "out"
    paths = tables.write_tables(df, out, ["csv", "parquet", "md"])
    assert {p.name for p in paths} >= {"results.csv", "results.parquet", "summary.md",
                                       "summary_scaling.parquet", "summary_kv_cache.csv"}
    assert not list(out.glob("*.pkl")) and not list(out.glob("*.pickle"))
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), df)
    summary = tables.summary_tables(df)["scaling"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "summary_scaling.parquet"), summary)
    back = pd.read_csv(out / "results.csv")
    assert back.shape == df.shape and list(back.columns) == list(df.columns)
    assert back["value"].sum() == pytest.approx(df["value"].sum())
    md = (out / "summary.md").read_text()
    assert "## scaling" in md and "## kv_cache" in md and "banded_window" in md and "oom" in md


def test_plots_created(tmp_path):
    from harness.reports.plots import make_plots
    runs = load_runs([make_run(tmp_path, "a", status={("banded_window", 4096): ("nan", "nan output")})])
    plots = make_plots(tidy(runs), runs, tmp_path / "plots")
    names = {p.path.name for p in plots}
    assert {"scaling_scaling.png", "kv_cache_bars.png", "finetune_accuracy.png",
            "receptive_field_heatmap_a.png"} <= names
    for p in plots:
        assert p.path.stat().st_size > 2000, p.path


def test_plotted_exponent_is_the_stored_one(tmp_path):
    """The plot's legend exponent equals fits.json's: read from it, or fitted over the same sizes."""
    from harness.bench.fit import fits_from_rows
    from harness.spec.stats import fit_loglog
    from harness.reports import plots
    from tests.run_folders import read
    run = make_run(tmp_path, "a", jitter={256: 8.0, 512: 2.0})  # overheads bend the small sizes
    stored = fits_from_rows(read(run))
    (run / "fits.json").unlink()
    without = load_runs([run])
    (run / "fits.json").write_text(json.dumps(stored))
    with_fits = load_runs([run])
    for runs in (without, with_fits):
        data = plots._wide(tidy(runs).query("suite == 'scaling'"))
        data["n"] = data["n"].astype(float)
        for case, g in data[data["status"] == "ok"].groupby("case"):
            f = plots._fit_for({r.run_id: r for r in runs}, "a", "scaling", case, "time_s",
                               g["n"], g["time_s"], True)
            assert f["exponent"] == pytest.approx(stored[f"scaling|{case}"]["exponent"]), case
            assert plots.fit_label(f) == plots.fit_label(stored[f"scaling|{case}"])
            every = fit_loglog(g["n"], g["time_s"], points="all")["exponent"]
            assert abs(every - f["exponent"]) > 0.05  # the choice of points matters here
    assert plots.fit_label({"exponent": 2.0, "ci95": None}) == "k=2.00"
    assert plots.fit_label(None) == ""


def test_identical_run_exit_0(tmp_path, capsys):
    run, base = make_run(tmp_path, "run"), make_run(tmp_path, "base")
    assert report(run, "--baseline", base, "--out", tmp_path / "o", "--formats", "csv", "--no-plots") == 0
    table = pd.read_csv(tmp_path / "o" / "comparison.csv")
    assert (table["verdict"] == "regression").sum() == 0 and (table["verdict"] == "ok").sum() > 10
    assert "no regression" in capsys.readouterr().out


def _scale_times(run: Path, factor: float, case: str | None = None, n: int | None = None) -> None:
    """Multiply the time of matching scaling points (and divide their rates) in a run folder."""
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    for r in rows:
        if r["suite"] == "scaling" and r["status"] == "ok" and case in (None, r["case"]) \
                and n in (None, r["params"]["n"]):
            m = r["metrics"]
            m["time_s"] *= factor
            m["time_iqr_s"] *= factor
            m["tflops"] /= factor
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_one_slower_kernel_is_a_regression(tmp_path, capsys):
    run, base = make_run(tmp_path, "run"), make_run(tmp_path, "base")
    _scale_times(run, 2.0, "target.sdpa", 1024)
    assert report(run, "--baseline", base, "--out", tmp_path / "o", "--no-plots") == 1
    regs = pd.read_csv(tmp_path / "o" / "regressions.csv")
    key = 'scaling|target.sdpa@reference|{"batch":1,"dtype":"float32","head_dim":64,"heads":4,"n":1024}'
    assert key == key_of("scaling", "target.sdpa", {"n": 1024, "batch": 1, "heads": 4, "head_dim": 64,
                                                    "dtype": "float32"}, role="target")
    assert set(regs["key"]) == {key} and set(regs["metric"]) == {"time_s", "tflops"}
    assert "target.sdpa" in (tmp_path / "o" / "regressions.md").read_text()
    assert "REGRESSIONS" in capsys.readouterr().out
    # a comparison kernel 2x slower: reported, gated only with --cases all
    other = make_run(tmp_path, "other")
    _scale_times(other, 2.0, "banded_window", 1024)
    assert report(other, "--baseline", base, "--out", tmp_path / "b", "--no-plots") == 0
    assert report(other, "--baseline", base, "--out", tmp_path / "b", "--no-plots", "--cases", "all") == 1


def test_machine_drift_is_taken_out_but_a_large_one_is_a_regression(tmp_path):
    """Everything 15 % slower (a busy shared machine): no point regresses, the suite row says x1.15
    within its 25 % CPU floor. Everything 2x slower: the suite row is the regression, not 40 points.
    A kernel 2x slower on a machine 15 % faster is still caught (net of the drift)."""
    base = make_run(tmp_path, "base")
    busy = make_run(tmp_path, "busy")
    _scale_times(busy, 1.15)
    table = gate.gate_table(tidy(load_runs([busy])), tidy(load_runs([base])), scope="all")
    suite_row = table[(table["metric"] == "time_s:suite_median") & (table["suite"] == "scaling")]
    assert len(suite_row) == 1 and suite_row["current"].iloc[0] == pytest.approx(1.15)
    assert suite_row["verdict"].iloc[0] == "ok" and not (table["verdict"] == "regression").any()
    slow = make_run(tmp_path, "slow")
    _scale_times(slow, 2.0)
    regs = gate.regressions(gate.gate_table(tidy(load_runs([slow])), tidy(load_runs([base])), scope="all"))
    assert regs["metric"].tolist() == ["time_s:suite_median"] and regs["suite"].tolist() == ["scaling"]
    table = gate.gate_table(tidy(load_runs([slow])), tidy(load_runs([base])))  # default: --cases target
    assert gate.regressions(table).empty and (table["verdict"] == gate.UNGATED).sum() == 1
    mixed = make_run(tmp_path, "mixed")
    _scale_times(mixed, 1 / 1.15)
    _scale_times(mixed, 2.0, "reference.naive", 2048)
    regs = gate.regressions(gate.gate_table(tidy(load_runs([mixed])), tidy(load_runs([base])), scope="all"))
    assert set(regs["case"]) == {"reference.naive"} and set(regs["metric"]) == {"time_s", "tflops"}


def test_cpu_memory_has_an_absolute_slack_gpu_memory_does_not():
    base = {"peak_mem_bytes": 4e6}
    assert decide.tolerance("peak_mem_bytes", base, "cpu") == pytest.approx(decide.MEM_SLACK_CPU / 4e6)
    assert decide.tolerance("peak_mem_bytes", base, "cuda:0") == decide.FLOOR["peak_mem_bytes"]
    assert decide.tolerance("peak_mem_bytes", {"peak_mem_bytes": 4e9}, "cpu") == decide.FLOOR["peak_mem_bytes"]
    assert decide.tolerance("time_s", {"time_s": 1.0}, "cpu") == gate_rule.TIME_FLOOR["cpu"]
    assert decide.tolerance("time_s", {"time_s": 1.0}, "cuda:0") == gate_rule.TIME_FLOOR["cuda"]


def test_noisy_run_within_spread_exit_0(tmp_path):
    base = make_run(tmp_path, "base", iqr=0.35)  # allowed: 2 x 35 % = 70 %
    jitter = {256: 1.0, 512: 1.0, 1024: 1.6, 2048: 1.0, 4096: 1.0}
    run = make_run(tmp_path, "run", iqr=0.1, jitter=jitter)
    assert report(run, "--baseline", base, "--out", tmp_path / "o", "--formats", "csv", "--no-plots") == 0
    # the same jitter against a quiet baseline (CPU floor 25 %) is a regression
    quiet = make_run(tmp_path, "quiet", iqr=0.01)
    assert report(run, "--baseline", quiet, "--out", tmp_path / "q", "--formats", "csv", "--no-plots") == 1
    # ... unless the run itself measured that much noise: the noisier side's spread counts
    noisy = make_run(tmp_path, "noisy", iqr=0.35, jitter=jitter)
    assert report(noisy, "--baseline", quiet, "--out", tmp_path / "n", "--formats", "csv", "--no-plots") == 0
    assert decide.tolerance("time_s", {"time_s": 1.0, "time_iqr_s": 0.01}, "cpu",
                             {"time_s": 1.0, "time_iqr_s": 0.2}) == pytest.approx(0.4)


def test_status_change_and_formula_mismatch_are_regressions(tmp_path):
    base = make_run(tmp_path, "base")
    broken = make_run(tmp_path, "broken", status={("banded_window", 2048): ("error", "RuntimeError: x")})
    assert report(broken, "--baseline", base, "--out", tmp_path / "o", "--formats", "csv", "--no-plots",
                  "--cases", "all") == 1
    regs = pd.read_csv(tmp_path / "o" / "regressions.csv")
    assert regs["metric"].tolist() == ["status"] and "ok -> error" in regs["note"][0]
    assert '"n":2048' in regs["key"][0]
    # the reverse (error in the baseline, ok now) is not a regression
    assert report(base, "--baseline", broken, "--out", tmp_path / "r", "--formats", "csv", "--no-plots",
                  "--cases", "all") == 0
    off = make_run(tmp_path, "off", rf_off=1)
    table = gate.gate_table(tidy(load_runs([off])), tidy(load_runs([base])), scope="all")
    regs = gate.regressions(table)
    assert set(regs["metric"]) == {"receptive_field==formula"} and len(regs) == 3


@pytest.mark.filterwarnings("ignore:.*no env.json")
def test_input_errors_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert report(empty) == 2
    assert "no results.jsonl" in capsys.readouterr().err
    assert report(tmp_path / "nope") == 2
    run = make_run(tmp_path, "run")
    assert report(run, "--formats", "csv,pickle") == 2
    assert "pickle" in capsys.readouterr().err
    assert report(run, "--baseline", tmp_path / "missing") == 2
    row = json.dumps(_row("e", "scaling", "lstm", {"n": 1}, {"time_s": 1.0})) + "\n"
    with pytest.raises(InputError, match="results.jsonl:2: not valid JSON"):
        (empty / "results.jsonl").write_text(row + "{oops\n" + row)
        load_runs([empty])
    with pytest.raises(InputError, match="results.jsonl:1: a result row needs the field.s. key, role"):
        (empty / "results.jsonl").write_text('{"suite": "s", "case": "c"}\n' + row)
        load_runs([empty])


def test_truncated_last_line_is_skipped(tmp_path):
    run = make_run(tmp_path, "run")
    with open(run / "results.jsonl", "a") as fh:
        fh.write('{"key": "scaling|x|{}", "suite": "scal')
    with pytest.warns(UserWarning, match="truncated"):
        df = tidy(load_runs([run]))
    assert "x" not in set(df["case"])


def test_pytest_benchmark_json_accepted(tmp_path):
    bench = write_pytest_benchmark(tmp_path / "bench.json")
    df = tidy(load_runs([bench, make_run(tmp_path, "run")]))
    pb = df[df["suite"] == "pytest-benchmark"]
    assert set(pb["case"]) == {"test_sdpa[256]", "test_sdpa[512]", "test_sdpa[1024]"}
    med = pb[(pb["case"] == "test_sdpa[512]") & (pb["metric"] == "time_s")]["value"].item()
    assert med == pytest.approx(0.004)
    assert set(pb["machine"]) == {"hostB/Synthetic CPU"} and "time_iqr_s" in set(pb["metric"])
    assert report(bench, "--baseline", bench, "--out", tmp_path / "o", "--formats", "md") == 0
    assert (tmp_path / "o" / "plots" / "pytest-benchmark_scaling.png").stat().st_size > 2000
    slow = write_pytest_benchmark(tmp_path / "slow.json", median=0.006)
    assert report(slow, "--baseline", bench, "--out", tmp_path / "s", "--formats", "csv", "--no-plots") == 1


def _split_job(root: Path, name: str, **kw) -> Path:
    """One job in two run folders, as ``harness run`` writes it: OUT (kernels) + OUT/finetune."""
    job = make_run(root, name, **kw)
    rows = [json.loads(line) for line in (job / "results.jsonl").read_text().splitlines()]
    ft = job / "finetune"
    ft.mkdir()
    (ft / "env.json").write_text((job / "env.json").read_text())
    (ft / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["suite"] == "finetune"))
    (job / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["suite"] != "finetune"))
    return job


def test_job_folder_reads_its_sub_folder_runs(tmp_path):
    """``report OUT`` reads OUT and OUT/finetune; a baseline laid out the same way compares point by
    point with nothing 'missing'; a folder named twice is read once."""
    job, base = _split_job(tmp_path, "job"), _split_job(tmp_path, "base")
    runs = load_runs([job, job / "finetune"])
    assert sorted(r.path.name for r in runs) == ["finetune", "job"]
    table = gate.gate_table(tidy(runs), tidy(load_runs([base])))
    assert not (table["verdict"].isin(["missing", "new", "regression"])).any(), table["verdict"].tolist()
    acc = table[(table["suite"] == "finetune") & (table["metric"] == "accuracy")]
    assert len(acc) == 2 and (acc["verdict"] == "ok").all()
    # the fine-tune half of the job alone: the kernel points are missing (once each, not per run),
    # each a regression unless the run says it was not asked for them (tests/test_gate.py)
    alone = gate.gate_table(tidy(load_runs([job / "finetune"])), tidy(load_runs([base])))
    missing = alone[alone["metric"] == "point"]
    assert len(missing) == missing["key"].nunique() > 10
    assert (missing["verdict"] == "regression").sum() == (missing["role"] == "target").sum() > 0
    # a regression in the sub-folder run still fails the job
    worse = _split_job(tmp_path, "worse", slow=2.0)  # tokens_per_s halves too (finetune has no time_s)
    assert report(worse, "--baseline", base, "--out", tmp_path / "o", "--formats", "csv", "--no-plots",
                  "--cases", "all") == 1
    regs = pd.read_csv(tmp_path / "o" / "regressions.csv")
    assert "finetune" in set(regs["suite"]) and "scaling" in set(regs["suite"])
    (tmp_path / "hollow" / "sub").mkdir(parents=True)
    with pytest.raises(InputError, match="no sub-folder"):
        load_runs([tmp_path / "hollow"])
