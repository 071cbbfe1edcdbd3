"""One worker per device: the benchmark fan-out and pytest-xdist's GPU placement."""
from __future__ import annotations

import json

from harness.bench.devices import plan
from harness.cli import main as cli
from harness.plugin import xdist_device


def test_plan_is_round_robin_one_worker_per_device():
    assert plan(["a", "b", "c"], ["cuda:0", "cuda:1"]) == [("cuda:0", ["a", "c"]), ("cuda:1", ["b"])]
    assert plan(["a"], ["cuda:0", "cuda:1", "cuda:2"]) == [("cuda:0", ["a"])]
    assert plan(["a", "b"], ["cpu", "cpu"]) == [("cpu", ["a"]), ("cpu", ["b"])]


def test_xdist_workers_spread_over_gpus():
    assert [xdist_device("cuda", f"gw{i}", 2) for i in range(4)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert xdist_device("cuda", "gw3", 1) == "cuda"      # one GPU: nothing to spread
    assert xdist_device("cpu", "gw1", 4) == "cpu"        # CPU runs stay on the CPU
    assert xdist_device("cuda:1", "gw0", 4) == "cuda:1"  # an explicit device is kept
    assert xdist_device("cuda", None, 4) == "cuda"       # not under xdist


def test_fan_out_writes_one_run_folder_per_worker(tmp_path):
    out = tmp_path / "run"
    assert cli(["bench", "--devices", "cpu,cpu", "--suite", "receptive_field,kv_cache",
                "--profile", "tiny", "--out", str(out), "--no-progress"]) == 0
    suites = {}
    for folder in sorted(out.iterdir()):
        rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
        suites[folder.name] = {r["suite"] for r in rows}
    assert suites == {"worker0_cpu": {"receptive_field"}, "worker1_cpu": {"kv_cache"}}
    assert cli(["report", str(out / "worker0_cpu"), str(out / "worker1_cpu"),
                "--out", str(tmp_path / "report"), "--no-plots"]) == 0
