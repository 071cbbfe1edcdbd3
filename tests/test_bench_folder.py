"""``harness bench`` keeps what it recorded: the run folder's lock and the refusal of a folder that
holds results (``--resume`` / ``--overwrite``). Tiny profile; no timing assertions."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench.store import FolderExists, ResultStore, read_rows
from harness.cli import main as cli_main
from harness.runfolder import FolderBusy, append_jsonl, locked_by, read_jsonl

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--impl", "reference", "--suite", "scaling", "--cases", "banded_window", "--sizes", "32,64"]


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
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from harness.runfolder import FolderLock; "
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
    rows = read_rows(out / "results.jsonl")
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
