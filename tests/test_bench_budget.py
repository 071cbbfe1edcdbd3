"""The run-level time budget (``--time-budget-s``): no point starts after the deadline, a CPU sweep
validates no size after it, the open-ended suites go last, a spent budget records every point as
skipped with the reason. The clocks here are fake, or only their bookkeeping is checked."""
from __future__ import annotations

import json
import types

from harness.bench import profiles
from harness.bench.points import BUDGET_REASON, Point, PointRunner
from harness.bench.store import ResultStore, read_jsonl
from harness.bench.sweep import Slot, run_sweep
from harness.bench.timer import Timing
from harness.cli import main as cli_main
from harness.commands import bench as bench_cmd


def test_runner_starts_no_point_after_the_deadline(tmp_path):
    now = [0.0]

    def step(result):
        def measure():
            now[0] += 1.0
            return result
        return measure
    pts = [Point("s", "c", {"n": i}, step({"time_s": float(i)})) for i in range(4)]
    pts.append(Point("s", "c", {"n": 9}, lambda: {"time_s": 9.0}, measured=lambda: True))
    runner = PointRunner(ResultStore(tmp_path), "x", "cpu", progress=False, verbose=False,
                    deadline=1.5, budget_s=1.5, clock=lambda: now[0])
    rows = runner.run(pts)
    assert [r["status"] for r in rows] == ["ok", "ok", "skipped", "skipped", "ok"]
    assert rows[2]["reason"].startswith(BUDGET_REASON) and "1.5 s" in rows[2]["reason"]
    assert now[0] == 2.0  # the skipped points never ran


def test_cpu_sweep_validates_no_size_after_the_deadline():
    now = [0.0]
    prof = profiles.get("tiny").scaling

    def prepare(n):
        def go():
            now[0] += 1.0
            return (lambda: sum(range(50))), {"n": n}
        return go
    slots = [Slot(n, prepare(n)) for n in (32, 64, 128)]
    out = run_sweep(slots, prof, RuntimeError, deadline=1.5, clock=lambda: now[0])
    assert isinstance(out[32], Timing) and isinstance(out[64], Timing)
    assert isinstance(out[128], RuntimeError) and str(out[128]).startswith(BUDGET_REASON)


def test_budget_option_defaults_and_suite_order():
    gpu, cpu = profiles.get("gpu"), profiles.get("cpu")
    ns = types.SimpleNamespace
    assert bench_cmd.time_budget(ns(time_budget_s=None), gpu) == gpu.time_budget_s
    assert bench_cmd.time_budget(ns(time_budget_s=0.0), gpu) is None
    assert bench_cmd.time_budget(ns(time_budget_s=30.0), cpu) == 30.0
    assert bench_cmd.time_budget(ns(time_budget_s=None), cpu) is None
    order = ["scaling", "receptive_field", "kv_cache", "timer_selfcheck"]
    assert bench_cmd.order_for_budget(order, 10.0) == ["receptive_field", "kv_cache", "timer_selfcheck", "scaling"]
    assert bench_cmd.order_for_budget(order, None) == order


def test_spent_budget_records_every_point_as_skipped(tmp_path):
    out = tmp_path / "run"
    assert cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu", "--no-progress",
                     "--suite", "scaling,receptive_field", "--cases", "banded_window,mistral_block",
                     "--sizes", "32,64", "--time-budget-s", "0.001"]) == 0
    rows = read_jsonl(out / "results.jsonl")
    assert [r["suite"] for r in rows][:1] == ["receptive_field"]  # scaling goes last under a budget
    # scaling: 2 sizes x the tiny profile's 3 passes; rf has banded_window too
    assert len(rows) == 2 * 3 + 2 * len(profiles.get("tiny").receptive_field.depths)
    assert all(r["status"] == "skipped" and r["reason"].startswith(BUDGET_REASON) for r in rows)
    assert json.loads((out / "env.json").read_text())["time_budget_s"] == 0.001


class _Planted(Slot):
    """A sweep slot whose blocks "take" planted seconds (no clock read: nothing here is timed)."""
    def __init__(self, n, times):
        super().__init__(n, lambda: ((lambda: None), {"n": n}))
        self.planted = iter(times)

    def block(self, clock=None) -> float:
        return next(self.planted) * self.number


def test_noisy_sizes_take_more_blocks_within_the_runs_budget():
    """A size whose blocks spread too wide for the gate's stated slowdown (2 x IQR over 50 %) takes
    more blocks, up to ``spread_max_blocks``, while the run's budget lasts; a quiet size does not.
    Here a burst (blocks 2 and 4 at 3x) is outvoted by the quiet blocks after it."""
    import dataclasses

    from harness.bench.sweep import too_noisy
    prof = dataclasses.replace(profiles.get("tiny").scaling, min_blocks=5, min_run_s=0.0, max_run_s=1e9,
                               spread_max_blocks=12)
    quiet = _Planted(32, [1e-3] * 40)
    noisy = _Planted(64, [1e-3, 3e-3, 1e-3, 3e-3, 1.1e-3] + [1e-3] * 40)
    budget = {"left_s": 1e9}  # the planted blocks' "seconds" are per call x calls per block
    out = run_sweep([quiet, noisy], prof, RuntimeError, budget=budget)
    assert out[32].repeats == 5 and too_noisy(noisy.samples[:5])
    assert 5 < out[64].repeats <= 12 and not too_noisy(noisy.samples)
    assert budget["left_s"] < 1e9
    # no budget left: recorded as it is (the gate then calls it undecided)
    again = _Planted(64, [1e-3, 3e-3, 1e-3, 3e-3, 1.1e-3] + [1e-3] * 40)
    out = run_sweep([again], prof, RuntimeError, budget={"left_s": 0.0})
    assert out[64].repeats == 5 and too_noisy(again.samples)
    assert profiles.get("cpu").scaling.spread_budget_s > 0 == profiles.get("tiny").scaling.spread_budget_s
