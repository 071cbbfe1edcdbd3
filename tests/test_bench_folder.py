"""``harness bench`` keeps what it recorded: the run folder's lock, the refusal of a folder that
holds results (``--resume`` / ``--overwrite``), and a kill mid-sweep that keeps every finished
point. Tiny profile; no timing assertions (the kill test waits for a file the planted target
writes, not for a duration)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.bench.store import FolderExists, ResultStore, read_jsonl
from harness.cli import main as cli_main
from harness.verdicts.runfolder import FolderBusy, append_jsonl, locked_by, read_jsonl

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--impl", "reference", "--suite", "scaling", "--cases", "banded_window", "--sizes", "32,64",
         "--passes", "fwd"]


def bench(out, *extra) -> int:
    return cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu",
                     "--no-progress", *extra])


def test_a_second_run_on_a_locked_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    with ResultStore(out):
        assert bench(out, *SMALL, "--resume") == 2
        err = capsys.readouterr().err
        assert f"pid {os.getpid()}" in err and "another harness bench" in err and "another --out" in err
        assert locked_by(out).startswith(f"pid {os.getpid()}")
        with pytest.raises(FolderBusy):
            ResultStore(out, resume=True)
    assert locked_by(out) is None
    assert bench(out, *SMALL, "--resume") == 0  # released when the first one closed


def test_a_killed_holder_leaves_the_folder_unlocked(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from harness.verdicts.runfolder import FolderLock; "
            f"lock = FolderLock({str(out)!r}, ['holder']); print('locked', flush=True); time.sleep(120)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert bench(out, *SMALL) == 2
        assert f"pid {holder.pid}: holder" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert bench(out, *SMALL) == 0


def test_an_existing_out_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    assert bench(out, *SMALL) == 0
    before = (out / "results.jsonl").read_text()
    assert len(before.splitlines()) == 2
    assert bench(out, *SMALL, "--cases", "lstm") == 2  # would have wiped the 2 rows
    err = capsys.readouterr().err
    assert "already holds 2 result row(s)" in err and "--resume" in err and "--overwrite" in err
    assert (out / "results.jsonl").read_text() == before
    assert bench(out, *SMALL, "--resume") == 0 and (out / "results.jsonl").read_text() == before
    (out / "fits.json").write_text("{\"stale\": 1}")
    assert bench(out, "--impl", "reference", "--suite", "kv_cache", "--cases", "mqa", "--overwrite") == 0
    rows = read_jsonl(out / "results.jsonl")
    assert [r["case"] for r in rows] == ["mqa"] and not (out / "fits.json").exists()
    with pytest.raises(SystemExit):
        bench(out, *SMALL, "--resume", "--overwrite")
    with pytest.raises(FolderExists):
        ResultStore(out)


def test_append_drops_a_line_cut_by_a_kill(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"a": 1}\n{"b": 2, "c"')  # killed mid-write
    append_jsonl(path, {"d": 4})
    assert read_jsonl(path) == [{"a": 1}, {"d": 4}]
    path.write_text('{"a": 1}')  # a whole object without its newline is kept
    append_jsonl(path, {"d": 4})
    assert read_jsonl(path) == [{"a": 1}, {"d": 4}]
    path.write_text('{"a": 1}\nnot json\n{"d": 4}\n')
    with pytest.raises(ValueError, match="log.jsonl:2"):
        read_jsonl(path)


HANGING = '''
import os, time
from harness.reference.sliding_window import sliding_window_attention as _swa

WATCH = os.environ.get("HARNESS_TEST_HANG")  # the run's results.jsonl

def sliding_window_attention(query, key, value, window, scale=None):
    if WATCH:
        open(WATCH + ".hung", "w").write(str(os.getpid()))
        time.sleep(300)  # stuck here until the test kills the run
    return _swa(query, key, value, window, scale)
'''


def test_a_killed_bench_keeps_its_rows_and_resume_measures_the_rest(tmp_path):
    """SIGKILL while the target's case is in flight: the comparison case measured before it is on
    disk (fsynced), the folder is not left locked, and --resume measures only the missing points."""
    target = tmp_path / "hanging.py"
    target.write_text(textwrap.dedent(HANGING))
    out = tmp_path / "run"
    results = out / "results.jsonl"
    args = ["--impl", str(target), "--suite", "scaling", "--cases", "banded_window,target.sliding_window",
            "--sizes", "32,64,128", "--passes", "fwd"]
    proc = subprocess.Popen([sys.executable, "-m", "harness", "bench", *args, "--profile", "tiny", "--device",
                             "cpu", "--out", str(out), "--no-progress"],
                            cwd=ROOT, env={**os.environ, "HARNESS_TEST_HANG": str(results)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    hung = Path(str(results) + ".hung")
    try:
        for _ in range(1200):  # at most ~10 minutes on a very busy machine
            if hung.exists() or proc.poll() is not None:
                break
            time.sleep(0.5)
        assert hung.exists(), f"the run never reached the hang: exit {proc.poll()}, {proc.stderr.read()[-2000:]}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rows = read_jsonl(results)
    assert sorted((r["case"], r["params"]["n"]) for r in rows) == [("banded_window", n) for n in (32, 64, 128)]
    assert locked_by(out) is None  # the kernel dropped the dead run's lock
    assert bench(out, *args, "--resume") == 0
    again = read_jsonl(results)
    assert len(again) == len({r["key"] for r in again}) == 6
    assert {r["key"]: r["time_utc"] for r in again if r["case"] == "banded_window"} == \
        {r["key"]: r["time_utc"] for r in rows}  # kept, not measured again


def test_a_cpu_sweep_writes_each_size_the_moment_it_settles(tmp_path, monkeypatch):
    """Within one case's interleaved sweep: a size whose sampling is over is on disk before the
    others finish, so a kill (simulated: KeyboardInterrupt in a later block) loses only the sizes
    still being timed. Block costs are faked, so which size settles when is deterministic."""
    from harness.bench import Context, profiles, scaling, sweep
    from harness.bench.points import PointRunner
    from harness.boundary.loader import load_target

    cost = {32: 0.001, 64: 0.002, 128: 0.05}  # tiny profile: 128 and 64 settle in round 3, 32 in 5
    store = ResultStore(tmp_path / "run")
    killed = []

    def block(slot, clock=None):
        if slot.n == 32 and len(read_jsonl(store.path)) == 2 and not killed:
            killed.append(slot.n)
            raise KeyboardInterrupt  # the kill, mid-sweep
        return cost[slot.n] * slot.number

    monkeypatch.setattr(sweep.Slot, "block", block)
    monkeypatch.setattr(sweep, "_calibrate", lambda slot, min_block_s: cost[slot.n])
    prof = profiles.get("tiny", sizes=[32, 64, 128], passes=["fwd"])

    def run(store):
        ctx = Context(load_target("reference"), "reference", "cpu", prof, store, cases=("banded_window",))
        runner = PointRunner(store, "reference", "cpu", progress=False, verbose=False)
        ctx.record = runner.record
        return runner.run(scaling.points(ctx), desc="scaling")

    with pytest.raises(KeyboardInterrupt):
        run(store)
    store.close()
    rows = read_jsonl(store.path)
    assert killed and sorted(r["params"]["n"] for r in rows) == [64, 128]
    with ResultStore(tmp_path / "run", resume=True) as again:
        written = run(again)
    assert [r["params"]["n"] for r in written] == [32]
    assert sorted(r["params"]["n"] for r in read_jsonl(store.path)) == [32, 64, 128]


def test_resume_keeps_the_rows_of_suites_it_does_not_measure(tmp_path):
    """gpu_baseline.sh runs the scaling suite alone, then receptive_field (etc.) into the same folder
    with --resume: the second run must not drop the first one's non-ok rows (the "oom" and "skipped"
    points of the O(n^2) cases are results), while a resumed suite's own non-ok rows are measured
    again, so each key appears once."""
    out = tmp_path / "run"
    scaling = ["--impl", "reference", "--suite", "scaling", "--cases", "banded_window,torch.sdpa.efficient",
               "--sizes", "32,64", "--passes", "fwd"]
    assert bench(out, *scaling) == 0
    first = read_jsonl(out / "results.jsonl")
    skipped = {r["key"] for r in first if r["status"] == "skipped"}  # efficient is CUDA-only
    assert skipped and {r["case"] for r in first if r["key"] in skipped} == {"torch.sdpa.efficient"}
    assert bench(out, "--impl", "reference", "--suite", "receptive_field", "--cases", "banded_window",
                 "--resume") == 0
    rows = read_jsonl(out / "results.jsonl")
    assert [r for r in rows if r["suite"] == "scaling"] == first
    assert {r["suite"] for r in rows} == {"scaling", "receptive_field"}
    assert len({r["key"] for r in rows}) == len(rows)
    assert any(k.startswith("scaling|banded_window") for k in
               __import__("json").loads((out / "fits.json").read_text()))
    # resuming the scaling suite itself measures its non-ok points again (one row per key)
    assert bench(out, *scaling, "--resume") == 0
    again = read_jsonl(out / "results.jsonl")
    assert len({r["key"] for r in again}) == len(again) == len(rows)
    assert {r["key"] for r in again if r["status"] == "skipped"} == skipped


def test_store_resume_without_suites_drops_every_non_ok_row(tmp_path):
    from harness.bench.store import make_row
    path = tmp_path / "run"
    with ResultStore(path) as store:
        store.append(make_row("r", "scaling", "a", "reference", "cpu", {"n": 1}, status="oom", reason="x"))
        store.append(make_row("r", "kv_cache", "b", "reference", "cpu", {"n": 1}, status="error", reason="y"))
        store.append(make_row("r", "kv_cache", "c", "reference", "cpu", {"n": 1}))
    with ResultStore(path, resume=True, suites=["kv_cache"]) as store:
        assert [(r["case"], r["status"]) for r in store.rows()] == [("a", "oom"), ("c", "ok")]
        assert not store.is_done(store.rows()[0]["key"])
    with ResultStore(path, resume=True) as store:
        assert [(r["case"], r["status"]) for r in store.rows()] == [("c", "ok")]
