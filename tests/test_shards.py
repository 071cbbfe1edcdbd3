"""``harness check --shard K/N`` and ``--merge`` (issue 49, a CI matrix without Ray): the shards of one
run hold disjoint properties, together every one, and their joined report has the cells of the run made
in one piece (a planted bug's failures included: the merge exits 1)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.basics import options

ROOT = Path(__file__).resolve().parents[1]
BUG = ROOT / "tests" / "planted" / "mla" / "rope_part_dropped.py"


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "check", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def cells(folder: Path) -> list[tuple]:
    data = json.loads((folder / "conformance.json").read_text())
    return sorted((r["property"], r["target"], r["result"], r["kind"]) for r in data["results"])


def test_shards_of_a_run_merge_into_the_run(tmp_path):
    run = ["--impl", "reference", "--impl", str(BUG), "--jobs", "1", "-k", "mla"]
    whole = check(*run, "--report", str(tmp_path / "whole"))
    assert whole.returncode == 1, whole.stdout[-2000:]
    ran = []
    for k in (1, 2):
        part = check(*run, "--shard", f"{k}/2", "--report", str(tmp_path / f"s{k}"))
        assert part.returncode in (0, 1), part.stdout[-2000:] + part.stderr[-2000:]
        ran.append({c[0] for c in cells(tmp_path / f"s{k}") if c[3] not in ("skipped",)})
    assert all(not (a & b) for i, a in enumerate(ran) for b in ran[i + 1:]), ran  # disjoint properties
    merged = check("--merge", *(str(tmp_path / f"s{k}") for k in (1, 2)), "--report", str(tmp_path / "m"))
    assert merged.returncode == 1 and "check --merge: 2 report(s)" in merged.stdout, merged.stdout[-2000:]
    assert cells(tmp_path / "m") == cells(tmp_path / "whole")


def test_merge_names_what_is_missing(tmp_path):
    out = check("--merge", str(tmp_path / "nowhere"), "--report", str(tmp_path / "m"))
    assert out.returncode == 2 and "no conformance.json" in out.stderr
    out = check("--merge", str(tmp_path))
    assert out.returncode == 2 and "give --report DIR" in out.stderr


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b"])
def test_a_shard_is_k_of_n(text):
    import argparse
    with pytest.raises(argparse.ArgumentTypeError):
        options.shard(text)
    assert options.in_shard(list(range(7)), (2, 3)) == [1, 4]
    assert options.in_shard([1, 2], None) == [1, 2]
