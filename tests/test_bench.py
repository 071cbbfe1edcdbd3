"""``harness bench``: run folder schema, resume, failing targets, fits, receptive field,
KV cache, timers and telemetry. Tiny profile only; no timing assertions."""
from __future__ import annotations

import json
import math
import textwrap

import pytest
import torch

from harness import tolerance
from harness.bench import Context, profiles
from harness.bench.fit import fit_exponent, fits_from_rows, upper_half
from harness.bench import memory
from harness.bench.runner import NonFinite, Point, Runner, check_finite, is_oom
from harness.bench.store import FIELDS, STATUSES, ResultStore, make_key, make_row, read_rows
from harness.bench.telemetry import Telemetry, summarize
from harness.bench.timer import time_cpu, time_fn
from harness.cli import main as cli_main
from harness.loader import load_target

ENV_KEYS = ["harness_version", "git_commit", "time_utc", "hostname", "python", "torch", "cuda",
            "device_name", "driver", "cpu", "cpu_count", "peak_tflops_measured", "argv"]
THREADS = torch.get_num_threads()
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def bench(out, *extra) -> int:
    return cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu",
                     "--no-progress", *extra])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tiny"
    rc = bench(out, "--impl", "reference", "--suite", "all")
    return out, rc, read_rows(out / "results.jsonl")


def by(rows, suite, case=None):
    return [r for r in rows if r["suite"] == suite and (case is None or r["case"] == case)]


# ---------------------------------------------------------------- run folder and schema

def test_tiny_run_writes_the_run_folder(tiny_run):
    out, rc, rows = tiny_run
    assert rc == 0
    assert not memory._keeping and torch.get_num_threads() == THREADS  # process settings restored
    for name in ("env.json", "results.jsonl", "fits.json", "receptive_field_grad.csv"):
        assert (out / name).is_file(), name
    env = json.loads((out / "env.json").read_text())
    assert list(env)[: len(ENV_KEYS)] == ENV_KEYS
    assert env["peak_tflops_measured"]["float32"] > 0
    assert {r["suite"] for r in rows} == {"scaling", "receptive_field", "kv_cache", "timer_selfcheck"}
    for r in rows:
        assert list(r) == list(FIELDS)
        assert r["status"] in STATUSES
        assert r["key"] == make_key(r["suite"], r["case"], r["params"])
        assert r["run_id"] == "tiny" and r["impl"] == "reference" and r["device"] == "cpu"
        assert (r["reason"] is None) == (r["status"] == "ok")
    assert len({r["key"] for r in rows}) == len(rows)
    for r in by(rows, "scaling"):
        if r["status"] == "ok":
            m = r["metrics"]
            for k in ("time_s", "time_iqr_s", "time_min_s", "repeats", "peak_mem_bytes", "flops",
                      "tflops", "frac_of_peak"):
                assert k in m, k
            assert m["time_s"] > 0 and m["flops"] > 0
    cases = {r["case"] for r in by(rows, "scaling") if r["status"] == "ok"}
    assert {"target.sdpa", "reference.naive", "torch.sdpa.math", "torch.sdpa.flash", "banded_window",
            "target.sliding_window", "lstm"} <= cases
    skipped = {r["case"] for r in by(rows, "scaling") if r["status"] == "skipped"}
    assert {"torch.sdpa.efficient", "torch.sdpa.cudnn"} <= skipped  # CUDA-only on a CPU run
    fits = json.loads((out / "fits.json").read_text())
    assert {"exponent", "ci95", "n_range"} <= set(fits["scaling|banded_window"])
    lines = (out / "receptive_field_grad.csv").read_text().splitlines()
    assert lines[0] == "depth,distance,grad_norm" and len(lines) > 1


def test_receptive_field_equals_formula(tiny_run):
    _, _, rows = tiny_run
    rf = by(rows, "receptive_field")
    assert {r["case"] for r in rf} == {"mistral_block", "banded_window", "target.sliding_window", "hf_mistral"}
    for r in rf:
        assert r["status"] == "ok", r["reason"]
        m, p = r["metrics"], r["params"]
        assert m["receptive_field"] == p["depth"] * (p["window"] - 1) + 1 == m["formula"]
        assert m["match"] and m["contiguous"] and m["measured_extent"] == "w"


def test_kv_cache_bytes_equal_formula_and_head_ratios(tiny_run):
    _, _, rows = tiny_run
    kv = by(rows, "kv_cache")
    assert [r["case"] for r in kv] == ["mha", "gqa", "mqa", "rolling_window"]
    for r in kv:
        assert r["status"] == "ok", r["reason"]
        m, p = r["metrics"], r["params"]
        assert m["cache_bytes"] == m["cache_formula_bytes"]
        assert m["tokens_per_s"] > 0
        if r["case"] != "rolling_window":
            assert m["cache_bytes"] == 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * \
                (p["prompt"] + p["new_tokens"]) * p["batch"] * 4
            assert m["ratio_match"] and m["cache_ratio_vs_mha"] == p["kv_heads"] / p["heads"]
    roll = kv[-1]["metrics"]
    assert roll["capped"] and roll["cached_seq"] == kv[-1]["params"]["window"] - 1
    assert roll["cache_bytes"] < roll["full_cache_formula_bytes"]


def test_timer_selfcheck_row(tiny_run):
    _, _, rows = tiny_run
    (row,) = by(rows, "timer_selfcheck")
    assert row["status"] == "ok"
    assert {"time_s", "reference_time_s", "rel_diff", "passed"} <= set(row["metrics"])
    assert row["params"]["tolerance"] == 0.05
    for r in rows:  # a name is a param or a metric, never both (the report pivots on them)
        assert not set(r["params"]) & set(r["metrics"]), r["key"]


# ---------------------------------------------------------------- resume

def test_resume_skips_done_points(tmp_path):
    out = tmp_path / "run"
    args = ["--impl", "reference", "--suite", "scaling", "--cases", "banded_window,lstm", "--sizes", "32,64"]
    assert bench(out, *args) == 0
    first = read_rows(out / "results.jsonl")
    assert len(first) == 4 and all(r["status"] == "ok" for r in first)
    # plant a failed point: resume must measure exactly that one again
    lines = (out / "results.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken.update(status="error", reason="planted")
    lines[1] = json.dumps(broken)
    (out / "results.jsonl").write_text("\n".join(lines) + "\n{\"truncated")  # + a crash-cut line
    assert bench(out, *args, "--resume") == 0
    again = read_rows(out / "results.jsonl")
    assert sorted(r["key"] for r in again) == sorted(r["key"] for r in first)
    assert all(r["status"] == "ok" for r in again)
    kept = {r["key"]: r["time_utc"] for r in again}
    redone = [r for r in again if r["key"] == broken["key"]]
    assert len(redone) == 1
    for r in first:
        if r["key"] != broken["key"]:
            assert kept[r["key"]] == r["time_utc"]  # untouched
    assert again[-1]["key"] == broken["key"]  # re-measured last


# ---------------------------------------------------------------- failing targets

PLANTED = '''
import torch
import torch.nn.functional as F
from reference.sliding_window import sliding_window_attention as _swa

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    n = query.shape[-2]
    if n == {raise_n}:
        raise ValueError("planted failure at n={raise_n}")
    if n == {oom_n}:
        raise torch.OutOfMemoryError("CUDA out of memory (planted)")
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                          scale=scale, enable_gqa=enable_gqa)

def sliding_window_attention(query, key, value, window, scale=None):
    out = _swa(query, key, value, window, scale)
    if query.shape[-2] >= {nan_n}:
        out = out.clone()
        out[..., 0, 0] = float("nan")
    return out
'''


def test_failing_target_points_are_recorded_and_the_sweep_continues(tmp_path):
    target = tmp_path / "planted_target.py"
    target.write_text(textwrap.dedent(PLANTED.format(raise_n=64, oom_n=96, nan_n=64)))
    out = tmp_path / "run"
    assert bench(out, "--impl", str(target), "--suite", "scaling", "--sizes", "32,64,96,128",
                 "--cases", "target.sdpa,target.sliding_window,banded_window") == 0
    rows = read_rows(out / "results.jsonl")
    sdpa = {r["params"]["n"]: r for r in by(rows, "scaling", "target.sdpa")}
    assert [sdpa[n]["status"] for n in (32, 64, 96, 128)] == ["ok", "error", "oom", "ok"]
    assert "ValueError: planted failure at n=64" in sdpa[64]["reason"]
    assert "out of memory" in sdpa[96]["reason"]
    swa = {r["params"]["n"]: r for r in by(rows, "scaling", "target.sliding_window")}
    assert [swa[n]["status"] for n in (32, 64, 96, 128)] == ["ok", "nan", "nan", "nan"]
    assert "non-finite" in swa[64]["reason"]
    assert all(r["status"] == "ok" for r in by(rows, "scaling", "banded_window"))
    assert all(r["impl"] == str(target) for r in rows)


def test_unloadable_target_is_recorded_as_errors(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("raise ImportError('planted import failure')\n")
    out = tmp_path / "run"
    assert bench(out, "--impl", str(bad), "--suite", "scaling", "--sizes", "32,64",
                 "--cases", "target.sdpa,banded_window") == 0
    rows = read_rows(out / "results.jsonl")
    assert {r["status"] for r in by(rows, "scaling", "target.sdpa")} == {"error"}
    assert "planted import failure" in by(rows, "scaling", "target.sdpa")[0]["reason"]
    assert {r["status"] for r in by(rows, "scaling", "banded_window")} == {"ok"}


def test_runner_classifies_outcomes(tmp_path):
    store = ResultStore(tmp_path)
    runner = Runner(store, "x", "cpu", progress=False, verbose=False)

    def raise_(exc):
        def f():
            raise exc
        return f

    def nan():
        check_finite(torch.tensor([1.0, float("nan")]))
    pts = [Point("scaling", "a", {"n": 1}, lambda: {"time_s": 1.0}),
           Point("scaling", "a", {"n": 2}, raise_(MemoryError())),
           Point("scaling", "a", {"n": 3}, raise_(RuntimeError("CUDA error: out of memory"))),
           Point("scaling", "a", {"n": 4}, raise_(KeyError("boom"))),
           Point("scaling", "a", {"n": 5}, nan)]
    rows = runner.run(pts)
    assert [r["status"] for r in rows] == ["ok", "oom", "oom", "error", "nan"]
    assert "KeyError" in rows[3]["reason"] and "NaN" in rows[4]["reason"]
    assert is_oom(torch.OutOfMemoryError("x")) and not is_oom(ValueError("out of memory"))
    with pytest.raises(NonFinite):
        check_finite((torch.zeros(2), torch.tensor([float("inf")])))


def test_store_row_is_json_safe():
    row = make_row("r", "scaling", "c", "impl", "cpu", {"n": 2, "dtype": "float32"},
                   metrics={"time_s": float("nan"), "x": torch.tensor(3.0)})
    assert list(row) == list(FIELDS)
    assert row["metrics"] == {"time_s": None, "x": 3.0}
    json.dumps(row, allow_nan=False)
    with pytest.raises(ValueError):
        make_row("r", "s", "c", "i", "cpu", {}, status="bogus")


# ---------------------------------------------------------------- fits

def test_fit_quadratic_and_linear_with_ci():
    ns = [256, 362, 512, 724, 1024, 1448, 2048, 2896, 4096]
    quad = fit_exponent(ns, [3e-9 * n**2 for n in ns])
    assert math.isclose(quad["exponent"], 2.0, abs_tol=1e-9)
    assert quad["n_range"] == [1024, 4096] and quad["points"] == 5
    assert quad["ci95"][0] <= 2.0 <= quad["ci95"][1]
    noise = [1.0, 1.04, 0.97, 1.02, 0.99, 1.03, 0.98, 1.01, 1.0]  # deterministic +-4 %
    lin = fit_exponent(ns, [2e-6 * n * e for n, e in zip(ns, noise)])
    assert abs(lin["exponent"] - 1.0) < 0.1
    lo, hi = lin["ci95"]
    assert lo < lin["exponent"] < hi and lo <= 1.0 <= hi and hi - lo > 0
    assert fit_exponent([10], [1.0]) is None
    assert upper_half([1, 2, 3, 4]) == [2, 3, 4] and upper_half([1, 2]) == [1, 2]


def test_fits_from_rows_groups_by_case():
    rows = [make_row("r", "scaling", c, "i", "cpu", {"n": n, "heads": 2}, metrics={"time_s": f(n)})
            for c, f in (("dense", lambda n: n * n * 1e-9), ("band", lambda n: n * 1e-6))
            for n in (64, 128, 256, 512)]
    fits = fits_from_rows(rows)
    assert math.isclose(fits["scaling|dense"]["exponent"], 2.0) and math.isclose(fits["scaling|band"]["exponent"], 1.0)


# ---------------------------------------------------------------- receptive field conventions

W1_TARGET = '''
from reference.sliding_window import sliding_window_math
HARNESS_CONVENTIONS = {declared}
def sliding_window_attention(query, key, value, window, scale=None):
    return sliding_window_math(query, key, value, window, scale, extent="w+1").to(query.dtype)
'''


@pytest.mark.parametrize("declared, match", [({"window_extent": "w+1"}, True), ({}, False)])
def test_receptive_field_follows_the_window_convention(tmp_path, declared, match):
    from harness.bench import receptive_field
    path = tmp_path / f"w1_{len(declared)}.py"
    path.write_text(W1_TARGET.format(declared=declared))
    ctx = Context(load_target(str(path)), str(path), "cpu", profiles.get("tiny"), None)
    p = {"depth": 3, "window": 4, "n": 24, "dim": 16, "heads": 2, "kv_heads": 1, "dtype": "float64"}
    m = receptive_field.measure(ctx, "target.sliding_window", p)
    assert m["receptive_field"] == 3 * 4 + 1 and m["measured_extent"] == "w+1"
    assert m["match"] is match


# ---------------------------------------------------------------- kernels and adapters

def test_banded_and_naive_kernels_equal_the_reference():
    from reference.banded import banded_attention, visible_keys
    from reference.sliding_window import sliding_window_math
    gen = torch.Generator().manual_seed(0)
    for L, S, w, extent, block in [(37, 37, 5, "w", None), (7, 29, 3, "w", 2), (29, 29, 9, "w+1", 4),
                                   (16, 16, 40, "w", None), (1, 13, 4, "w", None)]:
        q = torch.randn(2, 3, L, 8, generator=gen, dtype=torch.float64)
        k, v = (torch.randn(2, 3, S, 8, generator=gen, dtype=torch.float64) for _ in range(2))
        tolerance.assert_close(banded_attention(q, k, v, w, extent=extent, block=block),
                               sliding_window_math(q, k, v, w, extent=extent), dtype=torch.float64)
    assert visible_keys(10, 4) == sum(min(i + 1, 4) for i in range(10)) / 10
    from reference import registry
    from reference.attention import attention_math
    naive = registry.create("naive_attention")
    q, k, v = (torch.randn(2, 3, 11, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    for causal in (False, True):
        tolerance.assert_close(naive(q, k, v, is_causal=causal), attention_math(q, k, v, is_causal=causal),
                               dtype=torch.float64)


def test_hf_model_runs_on_the_target_kernel():
    pytest.importorskip("transformers")
    from reference import registry
    from reference.attention import scaled_dot_product_attention as ref
    calls = []

    def counting_sdpa(*a, **kw):
        calls.append(kw.get("attn_mask") is not None)
        return ref(*a, **kw)
    cfg = dict(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
               num_attention_heads=4, max_position_embeddings=64)
    ids = torch.randint(0, 32, (2, 9), generator=torch.Generator().manual_seed(0))
    for name, extra in (("hf_llama", {}), ("hf_mistral", {"window": 3})):
        ours = registry.create(name, sdpa=counting_sdpa, num_key_value_heads=2, config=cfg,
                               dtype=torch.float64, **extra)
        assert ours.config._attn_implementation == "harness_target"
        eager = registry.create(name, num_key_value_heads=2, config=cfg, dtype=torch.float64, **extra)
        eager.config._attn_implementation = "sdpa"  # HF eager runs its softmax in float32
        with torch.no_grad():
            a, b = ours(ids).logits, eager(ids).logits
            tolerance.assert_close(a, b, dtype=torch.float64)
            # decoding on a DynamicCache (sliding-window layers for Mistral): same tokens
            from harness.bench.kv_cache import generate
            p = {"vocab": 32, "batch": 2, "prompt": 3, "new_tokens": 5}
            steps_ours, steps_ref = generate(ours, p, "cpu"), generate(eager, p, "cpu")
            assert steps_ours["cache_bytes"] == steps_ref["cache_bytes"]
            assert torch.equal(steps_ours["tokens"], steps_ref["tokens"])  # same greedy decode
    assert calls and all(calls)  # every call got an explicit mask


def test_registry_is_pluggable():
    from reference import registry
    registry.register("test_entry")(lambda *, sdpa=None, **_: ("built", sdpa))
    assert registry.create("test_entry", sdpa="S", unused=1) == ("built", "S")
    assert {"naive_attention", "banded_window", "mistral_block", "hf_llama", "hf_mistral"} <= set(registry.names())
    with pytest.raises(KeyError):
        registry.create("no_such_entry")


# ---------------------------------------------------------------- timers and telemetry

def test_cpu_timer_blocks_and_statistics_with_a_fake_clock():
    now = [0.0]
    costs = iter([0.05] + [0.004] * 1000)  # a cold first call, then 4 ms calls

    def fn():
        now[0] += next(costs)
    t = time_cpu(fn, min_block_s=0.02, min_run_s=0.1, min_blocks=5, max_run_s=1.0, warmup=0,
                 clock=lambda: now[0])
    assert t.number == 6  # recalibrated after the cold call: 6 x 4 ms >= 20 ms
    assert t.repeats == 5 and math.isclose(t.median_s, 0.004) and math.isclose(t.min_s, 0.004)
    assert math.isclose(t.iqr_s, 0.0, abs_tol=1e-12)


def test_cpu_timer_reports_blocks():
    t = time_cpu(lambda: torch.ones(64).sum(), min_block_s=0.002, min_run_s=0.01, min_blocks=3)
    assert t.repeats >= 3 and t.number >= 1 and t.median_s > 0 and t.iqr_s >= 0
    assert t.min_s <= t.median_s and t.method == "cpu_blocked"
    assert set(t.metrics()) >= {"time_s", "time_iqr_s", "time_min_s", "repeats"}


@pytest.mark.parametrize("keep", [False, True])
def test_cpu_peak_memory_sees_large_allocations(keep):
    if not memory.cpu_hwm_supported():
        pytest.skip("needs /proc/self/clear_refs (Linux)")
    memory.keep_freed_memory(keep)
    try:
        del_me = torch.ones(32 * 2**20)  # 128 MiB allocated and freed: the heap may keep it
        del del_me
        out, peak, method = memory.peak_memory(lambda: torch.ones(16 * 2**20).sum(), "cpu")  # 64 MiB
        assert method == "rss_hwm_delta" and float(out) == 16 * 2**20
        assert 60 * 2**20 <= peak < 200 * 2**20
    finally:
        memory.keep_freed_memory(False)


def test_telemetry_without_gpu_is_inert_and_summaries_reduce():
    with Telemetry.for_device("cpu") as tel:
        pass
    assert tel.summary() is None
    fake = iter([{"gpu_mem_used_bytes": 10, "power_w": 100.0, "sm_clock_mhz": 1500, "temp_c": 50},
                 {"gpu_mem_used_bytes": 30, "power_w": 200.0, "sm_clock_mhz": 1400, "temp_c": 55}] * 1000)
    with Telemetry(lambda: next(fake), interval_s=0.001) as tel:
        torch.ones(1000).sum()
    s = tel.summary()
    assert s["samples"] >= 2 and s["gpu_mem_used_bytes"] in (10, 30) and s["temp_c"] in (50, 55)
    assert summarize([]) is None
    assert summarize([{"power_w": None, "gpu_mem_used_bytes": 5}])["power_w"] is None


@needs_cuda
def test_cuda_timer_uses_events():
    a = torch.randn(1024, 1024, device="cuda")
    t = time_fn(lambda: a @ a, "cuda", rep_ms=5.0, warmup_ms=1.0)
    assert t.method == "cuda_events_l2flush" and t.repeats >= 10 and t.median_s > 0


@needs_cuda
def test_nvml_telemetry_samples_the_gpu():
    pytest.importorskip("pynvml")
    a = torch.randn(2048, 2048, device="cuda")
    with Telemetry.for_device("cuda:0", interval_s=0.01) as tel:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
    s = tel.summary()
    assert s is not None and s["samples"] >= 1 and s["gpu_mem_used_bytes"] > 0
