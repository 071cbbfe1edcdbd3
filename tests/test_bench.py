"""``harness bench``: run folder schema, resume, failing targets, fits, receptive field,
KV cache, timers and telemetry. Tiny profile only; no timing assertions."""
from __future__ import annotations

import json
import textwrap

import pytest
import torch

from harness.bench import Context, profiles
from harness.bench import memory
from harness.bench.kv_cache import TIME_RUNS
from harness.bench.points import NonFinite, Point, PointRunner, check_finite, is_oom
from harness.bench.store import FIELDS, STATUSES, ResultStore, make_row, point_key, read_jsonl
from harness.cli import main as cli_main
from harness.boundary.loader import load_target

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
    return out, rc, read_jsonl(out / "results.jsonl")


def by(rows, suite, case=None, pass_=None):
    """The rows of ``suite`` (and ``case``; and a scaling ``pass_``, "fwd" for rows without one)."""
    return [r for r in rows if r["suite"] == suite and (case is None or r["case"] == case)
            and (pass_ is None or r["params"].get("pass", "fwd") == pass_)]


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
        assert r["key"] == point_key(r["suite"], r["case"], r["params"], r["role"], "reference")
        assert ("@reference|" in r["key"]) == (r["role"] == "target")
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
    roles = {(r["suite"], r["case"]): r["role"] for r in rows}
    assert {c for c, role in roles.items() if role == "target"} == {
        ("scaling", "target.sdpa"), ("scaling", "target.sliding_window"),
        ("receptive_field", "target.sliding_window"), ("receptive_field", "hf_mistral"),
        ("kv_cache", "mha"), ("kv_cache", "gqa"), ("kv_cache", "mqa"), ("kv_cache", "rolling_window"),
        ("kv_cache", "paged")}
    for r in by(rows, "scaling"):
        if r["status"] == "ok":  # the peak memory's repeats (the gate's memory allowance)
            m = r["metrics"]
            if m["peak_mem_bytes"] is None:  # below the probe's resolution (the tiny sizes): says so
                assert m["peak_mem_min_bytes"] < m["peak_mem_resolution_bytes"], m
            else:
                assert m["peak_mem_min_bytes"] <= m["peak_mem_bytes"] <= m["peak_mem_max_bytes"]
            assert 1 <= m["peak_mem_repeats"] <= profiles.get("tiny").mem_repeats
            assert len(m["time_samples_s"]) == m["repeats"]  # the repeats themselves (the gate's rank test)
            assert m["time_detectable_slowdown"] >= 0.25
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
    assert [r["case"] for r in kv] == ["mha", "gqa", "mqa", "rolling_window", "paged"]
    paged = kv.pop()
    for r in kv:
        assert r["status"] == "ok", r["reason"]
        m, p = r["metrics"], r["params"]
        assert m["cache_bytes"] == m["cache_formula_bytes"]
        assert m["tokens_per_s"] > 0
        # every run timed (the memory repeats, then timing-only runs up to TIME_RUNS); the spread
        # and the stored samples are over runs, not over one run's steps (issue 25)
        assert m["repeats"] == max(m["peak_mem_repeats"], TIME_RUNS) == len(m["time_samples_s"])
        assert m["time_s"] > 0 and 0 <= m["time_iqr_s"] <= max(m["time_samples_s"]) - min(m["time_samples_s"])
        # the decoded logits equal one full forward (tolerance policy)
        assert m["decode_parity"] and m["decode_max_abs_error"] <= m["decode_allowed_error"], m
        if r["case"] != "rolling_window":
            assert m["cache_bytes"] == 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * \
                (p["prompt"] + p["new_tokens"]) * p["batch"] * 4
            assert m["ratio_match"] and m["cache_ratio_vs_mha"] == p["kv_heads"] / p["heads"]
    roll = kv[-1]["metrics"]
    assert roll["capped"] and roll["cached_seq"] == kv[-1]["params"]["window"] - 1
    assert roll["cache_bytes"] < roll["full_cache_formula_bytes"]
    # paged vs linear at the profile's fill: both equal their formulas, the pool holds the pages in use
    assert paged["status"] == "ok", paged["reason"]
    m, p = paged["metrics"], paged["params"]
    assert m["match"] and m["linear_match"] and m["table_match"] and m["decode_parity"] and m["linear_parity"], m
    assert m["linear_cache_bytes"] == 2 * p["batch"] * p["kv_heads"] * p["max_seq"] * p["head_dim"] * 4
    assert m["cache_bytes"] == 2 * sum(-(-n // p["block_size"]) for n in m["lengths_after"]) * p["kv_heads"] * \
        p["block_size"] * p["head_dim"] * 4 < m["linear_cache_bytes"]
    assert 0 <= m["cache_bytes"] - m["tokens_bytes"] <= m["waste_bound_bytes"]


def test_acceptance_checks_are_written_to_the_run_folder(tiny_run, capsys):
    """checks.json holds the checks the run printed (``harness run`` reads it): the reference passes the
    ones that count bytes and positions (the timer self-check is a timing, left out here)."""
    out, _, _ = tiny_run
    checks = json.loads((out / "checks.json").read_text())
    assert all(set(c) == {"name", "passed", "detail"} for c in checks), checks
    exact = [c for c in checks if c["name"].startswith(("kv cache", "paged", "receptive field", "rolling"))]
    assert {"kv cache bytes == formula", "receptive field of mistral_block"} <= {c["name"] for c in exact}
    assert all(c["passed"] is True for c in exact), exact


def _kv_row(case, kv, status="ok", reason=None, match=True):
    metrics = {"cache_bytes": 1024 * kv, "cache_formula_bytes": 1024 * kv if match else 999, "match": match} \
        if status == "ok" else {}
    return {"suite": "kv_cache", "case": case, "status": status, "reason": reason, "params": {"kv_heads": kv},
            "metrics": metrics}


def test_a_skipped_point_is_no_mismatch_and_its_reason_is_shown():
    """Issue 41: a target without attention_with_kvcache got "[FAIL] kv cache bytes == formula" with
    every byte count equal to its formula: the skipped paged point counted against it, unexplained."""
    from harness.bench import kv_cache, receptive_field
    why = "target 'mine.py' has no attribute 'attention_with_kvcache'"
    rows = [_kv_row("mha", 4), _kv_row("mqa", 1), _kv_row("paged", 1, "skipped", why)]
    (check,) = [c for c in kv_cache.summary(None, rows) if c.name == "kv cache bytes == formula"]
    assert check.passed is True, check.line()
    assert "mha kv=4: 4096 B == 4096 B" in check.detail and "measured vs formula" in check.detail
    assert f"not compared: paged kv=1 (skipped: {why})" in check.detail
    # a real mismatch fails and shows both numbers; a point that failed to run fails the check too
    (check,) = kv_cache.summary(None, rows[:1] + [_kv_row("gqa", 2, match=False)])[:1]
    assert check.passed is False and "gqa kv=2: 2048 B != 999 B" in check.detail
    (check,) = kv_cache.summary(None, rows[:1] + [_kv_row("gqa", 2, "error", "RuntimeError: boom")])[:1]
    assert check.passed is False and "gqa kv=2 (error: RuntimeError: boom)" in check.detail
    (check,) = kv_cache.summary(None, [_kv_row("mha", 4, "skipped", why)])
    assert check.passed is None and why in check.detail
    # the receptive field: a depth skipped by the time budget is not a mismatch either
    rf = [{"suite": "receptive_field", "case": "banded_window", "status": "ok", "reason": None,
           "params": {"depth": 1, "window": 4},
           "metrics": {"match": True, "window_extent": "w", "receptive_field": 4, "formula": 4}},
          {"suite": "receptive_field", "case": "banded_window", "status": "skipped", "params": {"depth": 8},
           "reason": "time budget: 225 s spent", "metrics": {}}]
    (check,) = receptive_field.summary(None, rf)
    assert check.passed is True and "not compared: depth 8 (skipped: time budget" in check.detail, check.line()


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
    first = read_jsonl(out / "results.jsonl")
    assert len(first) == 2 * 2 * 3 and all(r["status"] == "ok" for r in first)  # cases x sizes x passes
    # plant a failed point: resume must measure exactly that one again
    lines = (out / "results.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken.update(status="error", reason="planted")
    lines[1] = json.dumps(broken)
    (out / "results.jsonl").write_text("\n".join(lines) + "\n{\"truncated")  # + a crash-cut line
    with pytest.warns(UserWarning, match="truncated last line"):
        assert bench(out, *args, "--resume") == 0
    again = read_jsonl(out / "results.jsonl")
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
from harness.reference.sliding_window import sliding_window_attention as _swa

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
    rows = read_jsonl(out / "results.jsonl")
    for pass_ in ("fwd", "bwd", "fwd_bwd"):  # a forward that fails fails its backward points too
        sdpa = {r["params"]["n"]: r for r in by(rows, "scaling", "target.sdpa", pass_)}
        assert [sdpa[n]["status"] for n in (32, 64, 96, 128)] == ["ok", "error", "oom", "ok"]
        assert "ValueError: planted failure at n=64" in sdpa[64]["reason"]
        assert "out of memory" in sdpa[96]["reason"]
    swa = {r["params"]["n"]: r for r in by(rows, "scaling", "target.sliding_window", "fwd")}
    assert [swa[n]["status"] for n in (32, 64, 96, 128)] == ["ok", "nan", "nan", "nan"]
    assert "non-finite" in swa[64]["reason"]
    assert all(r["status"] == "ok" for r in by(rows, "scaling", "banded_window"))
    assert all(r["impl"] == str(target) for r in rows)


def test_unloadable_target_is_refused_and_records_nothing(tmp_path, capsys):
    """A target that does not import is not benchmarked at all: no points labelled with its name
    (the comparison kernels would have measured fine and the exit status said 0)."""
    bad = tmp_path / "broken.py"
    bad.write_text("raise ImportError('planted import failure')\n")
    out = tmp_path / "run"
    assert bench(out, "--impl", str(bad), "--suite", "scaling,kv_cache", "--sizes", "32,64",
                 "--cases", "target.sdpa,banded_window,mha") == 2
    err = capsys.readouterr().err
    assert f"the target {str(bad)!r} does not load" in err and "planted import failure" in err
    assert "no point was recorded" in err
    assert not (out / "results.jsonl").exists() and not (out / "env.json").exists()


def test_runner_classifies_outcomes(tmp_path):
    store = ResultStore(tmp_path)
    runner = PointRunner(store, "x", "cpu", progress=False, verbose=False)

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
    assert list(row) == list(FIELDS) and row["role"] == "comparison"
    assert row["metrics"] == {"time_s": None, "x": 3.0}
    mine = make_row("r", "scaling", "target.sdpa", "/home/me/attn.py", "cpu", {"n": 2}, role="target")
    assert mine["key"] == 'scaling|target.sdpa@attn.py|{"n":2}' and mine["impl"] == "/home/me/attn.py"
    json.dumps(row, allow_nan=False)
    with pytest.raises(ValueError):
        make_row("r", "s", "c", "i", "cpu", {}, status="bogus")


# ---------------------------------------------------------------- receptive field conventions

W1_TARGET = '''
from harness.reference.sliding_window import sliding_window_math
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


def test_shards_split_the_suites(tmp_path, capsys):
    """``--shard K/N`` (issue 49, a CI matrix): every N-th suite, whole (a suite's points and checks
    belong together); a shard left without one records nothing and exits 0."""
    args = ["--impl", "reference", "--suite", "scaling,kv_cache", "--sizes", "32,64",
            "--cases", "target.sdpa,mha"]
    assert bench(tmp_path / "s2", *args, "--shard", "2/2") in (0, 1)
    suites = {json.loads(line)["suite"] for line in (tmp_path / "s2" / "results.jsonl").read_text().splitlines()}
    assert suites == {"kv_cache"}, suites
    assert bench(tmp_path / "s3", *args, "--shard", "3/3") == 0
    assert not (tmp_path / "s3" / "results.jsonl").exists()
    assert "shard 3/3: suites (none) of scaling,kv_cache" in capsys.readouterr().err
