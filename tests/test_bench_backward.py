"""The scaling benchmark's backward passes: forward ("fwd"), backward alone ("bwd") and forward +
backward ("fwd_bwd") per case; FLOPs 2.5x / 3.5x the forward's; the pass in the row's params and
key (a forward key is the one it had before passes existed); a kernel without a backward gets
skipped backward points with the reason; old rows without a pass load as forward rows, and the
gate reports a backward point the baseline lacks as "new". Tiny sizes; the one timing comparison
is relative (two kernels' backward/forward ratios), never an absolute time."""
from __future__ import annotations

import json
import textwrap

import pytest

from harness.bench import scaling
from harness.bench.fit import fit_key, fits_from_rows
from harness.bench.store import make_row, point_key, read_jsonl
from harness.cli import main as cli_main
from harness.verdicts.runfolder import PASSES, pass_of, row_problem
from tests.run_folders import NS, _row, make_run


def bench(out, *extra) -> int:
    return cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu",
                     "--no-progress", "--suite", "scaling", *extra])


def by_pass(rows, case):
    out = {}
    for r in rows:
        if r["case"] == case:
            out.setdefault(pass_of(r["params"]), {})[r["params"]["n"]] = r
    return out


# ---------------------------------------------------------------- FLOPs, keys, schema

@pytest.mark.parametrize("case, extra", [("reference.naive", {"causal": False}),
                                         ("target.sdpa", {"causal": True}),
                                         ("banded_window", {"window": 8, "causal": True}),
                                         ("lstm", {})])
def test_backward_flops_are_2_5x_and_fwd_bwd_3_5x_the_forward(case, extra):
    base = ({"n": 96, "batch": 2, "dim": 32, "dtype": "float32"} if case == "lstm" else
            {"n": 96, "batch": 2, "heads": 3, "head_dim": 16, "dtype": "float32", **extra})
    fwd = scaling.flops_for(case, {**base, "pass": "fwd"})
    assert fwd == scaling.flops_for(case, base) > 0  # a row without a pass is a forward
    assert scaling.flops_for(case, {**base, "pass": "bwd"}) == 2.5 * fwd
    assert scaling.flops_for(case, {**base, "pass": "fwd_bwd"}) == 3.5 * fwd


def test_the_key_names_the_pass_and_a_forward_key_is_the_old_one():
    p = {"n": 64, "batch": 1, "heads": 2, "head_dim": 16, "dtype": "float32", "causal": False}
    old = point_key("scaling", "target.sdpa", p, "target", "reference")
    keys = {s: point_key("scaling", "target.sdpa", {**p, "pass": s}, "target", "reference") for s in PASSES}
    assert keys["fwd"] == old == 'scaling|target.sdpa@reference|{"batch":1,"causal":false,"dtype":' \
                                 '"float32","head_dim":16,"heads":2,"n":64}'
    assert len(set(keys.values())) == 3 and '"pass":"bwd"' in keys["bwd"]
    made = {s: scaling.params_for("lstm", 64, scaling_profile(), "cpu", s) for s in PASSES}
    assert [m["pass"] for m in made.values()] == list(PASSES)


def scaling_profile():
    from harness.bench import profiles
    return profiles.get("tiny").scaling


def test_a_backward_row_round_trips_and_an_old_row_loads_as_forward(tmp_path):
    from harness.reports.load import load_runs, tidy
    run = make_run(tmp_path, "old")  # written by hand without passes: forward rows
    params = {"n": 256, "batch": 1, "heads": 4, "head_dim": 64, "dtype": "float32", "pass": "bwd"}
    row = make_row("old", "scaling", "target.sdpa", "reference", "cpu", params,
                   metrics={"time_s": 2e-3, "time_iqr_s": 1e-4}, role="target")
    assert row_problem(row) is None and '"pass":"bwd"' in row["key"]
    with open(run / "results.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    df = tidy(load_runs([run]))
    sc = df[df["suite"] == "scaling"]
    assert set(sc["pass"]) == {"fwd", "bwd"}
    assert (sc.loc[sc["key"] == row["key"], "pass"] == "bwd").all()
    assert (sc["pass"] == "fwd").sum() > 0 and df[df["suite"] == "kv_cache"]["pass"].isna().all()
    assert row_problem({**row, "params": {**params, "pass": "sideways"}}).startswith("unknown pass")


def test_fits_are_per_pass_and_the_forward_keeps_its_key():
    rows = []
    for pass_, power in (("fwd", 2.0), ("bwd", 1.0)):
        for n in NS:
            rows.append(_row("a", "scaling", "reference.naive",
                             {"n": n, "batch": 1, "heads": 4, "head_dim": 64, "dtype": "float32",
                              **({} if pass_ == "fwd" else {"pass": pass_})},
                             {"time_s": 1e-3 * (n / 256) ** power}))
    found = fits_from_rows(rows)
    assert set(found) == {"scaling|reference.naive", "scaling|reference.naive:bwd"}
    assert found[fit_key("scaling", "reference.naive")]["exponent"] == pytest.approx(2.0)
    assert found[fit_key("scaling", "reference.naive", "bwd")]["exponent"] == pytest.approx(1.0)
    assert found["scaling|reference.naive:bwd"]["pass"] == "bwd"


# ---------------------------------------------------------------- measuring

NO_BACKWARD = '''
import torch
import torch.nn.functional as F

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    with torch.no_grad():  # a forward-only kernel: its output has no grad_fn
        return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal, scale=scale)

class _Window(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, window):
        from harness.reference.sliding_window import sliding_window_attention
        return sliding_window_attention(q, k, v, window).to(q.dtype)

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("forward-only window kernel")

def sliding_window_attention(query, key, value, window, scale=None):
    return _Window.apply(query, key, value, window)
'''


def test_a_kernel_without_a_backward_records_skipped_backward_points_with_the_reason(tmp_path):
    target = tmp_path / "fwd_only.py"
    target.write_text(NO_BACKWARD)
    out = tmp_path / "run"
    assert bench(out, "--impl", str(target), "--sizes", "32,64",
                 "--cases", "target.sdpa,target.sliding_window,banded_window") == 0
    rows = read_jsonl(out / "results.jsonl")
    assert len(rows) == 3 * 3 * 2 and len({r["key"] for r in rows}) == len(rows)
    for case, why in (("target.sdpa", "the output has no grad_fn"),
                      ("target.sliding_window", "NotImplementedError: forward-only window kernel")):
        got = by_pass(rows, case)
        assert all(r["status"] == "ok" for r in got["fwd"].values())
        for pass_ in ("bwd", "fwd_bwd"):
            for r in got[pass_].values():
                assert r["status"] == "skipped" and r["reason"].startswith("no backward: "), r
                assert why in r["reason"]
    banded = by_pass(rows, "banded_window")  # the harness's kernel has one: measured
    assert all(r["status"] == "ok" for p in PASSES for r in banded[p].values())
    m = banded["bwd"][64]["metrics"]
    assert m["flops"] == 2.5 * banded["fwd"][64]["metrics"]["flops"] and m["time_s"] > 0
    assert json.loads((out / "env.json").read_text())["passes"] == list(PASSES)


COUNTED_BACKWARD = '''
import pathlib

import torch

CALLS = pathlib.Path(__file__).with_suffix(".calls")  # one line per forward ("f") / backward ("b") call


def _math(q, k, v):
    scores = torch.matmul(q, k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        with CALLS.open("a") as f:
            f.write("f\\n")
        ctx.save_for_backward(q, k, v)
        return _math(q, k, v)

    @staticmethod
    def backward(ctx, grad):
        with CALLS.open("a") as f:
            f.write("b\\n")
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
            return torch.autograd.grad(_math(*leaves), leaves, grad)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return _Attention.apply(query, key, value)
'''


def _calls(tmp_path, passes: str) -> tuple[dict, list[str]]:
    """Bench a target whose custom autograd.Function logs each forward and backward call, timing
    ``passes``; (its scaling rows by pass, the calls it logged)."""
    target = tmp_path / f"counted_{passes.replace(',', '_')}.py"
    target.write_text(textwrap.dedent(COUNTED_BACKWARD))
    out = tmp_path / f"run_{passes.replace(',', '_')}"
    assert bench(out, "--impl", str(target), "--sizes", "256", "--cases", "target.sdpa", "--passes", passes) == 0
    log = target.with_suffix(".calls")
    return by_pass(read_jsonl(out / "results.jsonl"), "target.sdpa"), (log.read_text().split() if log.exists() else [])


def test_the_backward_row_times_the_targets_own_backward(tmp_path):
    """The bwd row is the target's hand-written backward, called at least once per timed repeat
    (its Function logs each call); a forward-only run never calls it. Counted, not timed: whether a
    slower backward shows as a higher ratio is the benchmark's business (a timing assertion here
    failed under saturated cores, when 4x the backward work measured no slower)."""
    rows, calls = _calls(tmp_path, "fwd,bwd")
    assert rows["fwd"][256]["status"] == rows["bwd"][256]["status"] == "ok"
    m = rows["bwd"][256]["metrics"]
    timed = m["repeats"] * m.get("calls_per_repeat", 1)
    assert m["time_min_s"] > 0 and calls.count("b") >= timed, (m, calls.count("b"))
    fwd_rows, fwd_calls = _calls(tmp_path, "fwd")
    assert "bwd" not in fwd_rows and "b" not in fwd_calls and "f" in fwd_calls


# ---------------------------------------------------------------- the gate

def _bwd_rows(name, slow=1.0):
    return [_row(name, "scaling", "target.sdpa",
                 {"n": n, "batch": 1, "heads": 4, "head_dim": 64, "dtype": "float32", "pass": "bwd"},
                 {"time_s": 2.5e-3 * (n / 256) ** 2 * slow, "time_iqr_s": 1e-5 * n})
            for n in NS]


def test_a_backward_point_the_baseline_lacks_is_new_not_a_regression(tmp_path):
    from harness.reports import gate
    from harness.reports.load import load_runs, requested, tidy
    base = load_runs([make_run(tmp_path, "base")])       # an old baseline: forward rows only
    runs = load_runs([make_run(tmp_path, "cur", extra_rows=_bwd_rows("cur"))])
    result = gate.gate(tidy(runs), tidy(base), requested=requested(runs))
    new = result.table[result.table["key"].str.contains('"pass":"bwd"')]
    assert len(new) == len(NS) and set(new["verdict"]) == {"new"}
    assert result.code == 0 and result.matched > 0


def test_backward_baseline_points_of_a_forward_only_run_are_not_requested(tmp_path):
    """A baseline with backward rows against a run that timed the forward only (``--passes fwd``,
    or a run folder written before passes existed): not requested, not missing."""
    from harness.reports import gate
    from harness.reports.load import load_runs, requested, tidy
    base = load_runs([make_run(tmp_path, "base", extra_rows=_bwd_rows("base"),
                               env_extra={"suites": ["scaling"], "passes": list(PASSES)})])
    for name, env in (("fwd_only", {"suites": ["scaling"], "passes": ["fwd"]}),
                      ("before_passes", {"suites": ["scaling"]})):
        runs = load_runs([make_run(tmp_path, name, env_extra=env)])
        result = gate.gate(tidy(runs), tidy(base), requested=requested(runs))
        bwd = result.table[result.table["key"].str.contains('"pass":"bwd"')]
        assert set(bwd["verdict"]) == {"not requested"}, name
        assert result.code == 0, result.regressions()
    runs = load_runs([make_run(tmp_path, "all_passes", env_extra={"suites": ["scaling"], "passes": list(PASSES)})])
    result = gate.gate(tidy(runs), tidy(base), requested=requested(runs))
    assert result.code == 1  # asked for the backward and did not measure it: missing, gated


def test_backward_plots_are_per_pass_titled_in_words_with_legends_outside(tmp_path, monkeypatch):
    from harness.reports import plots
    from harness.reports.load import load_runs, tidy
    figures = {}
    save = plots._save

    def keep(fig, out, name):
        if not name.startswith("scaling"):
            return save(fig, out, name)
        fig.canvas.draw()
        figures[name] = [(ax.get_title(), [t.get_text() for t in ax.get_legend().get_texts()],
                          ax.get_legend().get_window_extent().x0, ax.get_window_extent().x1)
                         for ax in fig.axes]
        return save(fig, out, name)
    monkeypatch.setattr(plots, "_save", keep)
    runs = load_runs([make_run(tmp_path, "a", extra_rows=_bwd_rows("a"))])
    made = plots.make_plots(tidy(runs), runs, tmp_path / "plots")
    assert {"scaling_scaling.png", "scaling_scaling_bwd.png"} <= {p.path.name for p in made}
    assert [t for t, *_ in figures["scaling_scaling_bwd"]][0] == "attention backward time vs sequence length"
    assert [t for t, *_ in figures["scaling_scaling"]][0] == "attention forward time vs sequence length"
    (label,) = figures["scaling_scaling_bwd"][0][1]
    assert label.startswith("reference (sdpa) (k=2.00")  # the backward's own exponent
    for name in ("scaling_scaling", "scaling_scaling_bwd"):
        for _, legend, x0, x1 in figures[name]:
            assert legend and x0 >= x1, "the legend overlaps the data area"
