"""Hyperparameter selection for the fine-tune (harness.bench.finetune_select): the validation split
never reads a test movie, the chosen point is the best mean on validation with paired deltas to the
incumbent, and a killed grid resumes where it stopped. Training is faked except in the smoke test."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.bench import finetune_select as sel
from harness.bench.finetune_train import Data, Hyper
from harness.bench.models import finetune_data as fd


def _reviews(n_movies=60, per_movie=7):
    rows = [{"text": f"snippet {m}-{i}", "label": (m + i) % 2, "movie": f"movie {m}"}
            for m in range(n_movies) for i in range(per_movie)]
    return pd.DataFrame(rows)


def test_validation_split_is_carved_from_training_movies_only():
    df = _reviews()
    train, test = fd.movie_split(df, 0.2)
    t2, val = fd.train_eval_split(df, 0.2, 0.15)
    test_movies = set(test["movie"])
    assert not test_movies & set(val["movie"]), "a test movie leaked into validation"
    assert not test_movies & set(t2["movie"]), "a test movie leaked into selection training"
    assert not set(t2["movie"]) & set(val["movie"]), "validation and training share a movie"
    assert set(t2["movie"]) | set(val["movie"]) == set(train["movie"])
    assert 0.15 * len(train) <= len(val) < 0.15 * len(train) + 7  # stops at the first movie past 15 %
    pd.testing.assert_frame_equal(fd.train_eval_split(df, 0.2)[1], test)


def _rec(point, seed, acc):
    return {"point": point, "seed": seed, "hyper": {"lr": 1.0}, "accuracy": acc, "val_loss": 0.4,
            "train_time_s": 10.0}


def test_summary_chooses_the_best_mean_and_pairs_deltas_by_seed():
    recs = [_rec("a", 0, 0.80), _rec("a", 1, 0.82), _rec("b", 0, 0.83), _rec("b", 1, 0.84),
            _rec("c", 0, 0.79)]
    s = sel.summarize(recs, incumbent="a")
    assert s["chosen"] == "b"
    b = next(r for r in s["points"] if r["point"] == "b")
    assert b["delta_vs_incumbent"] == pytest.approx(0.025)   # mean of +0.03, +0.02 (paired)
    lo, hi = b["delta_vs_incumbent_ci95"]
    assert lo < 0.025 < hi
    c = next(r for r in s["points"] if r["point"] == "c")
    assert c["delta_vs_incumbent"] == pytest.approx(-0.01) and c["delta_vs_incumbent_ci95"] is None
    assert "delta_vs_incumbent" not in next(r for r in s["points"] if r["point"] == "a")
    table = sel.markdown(s)
    assert "b (chosen)" in table and "a (incumbent)" in table
    assert all(line.count("|") == 7 for line in table.splitlines())  # no stray column breaks


def test_grid_runs_seed_by_seed_and_a_killed_run_resumes(tmp_path, monkeypatch):
    data = Data([[1, 2]] * 4, [0, 1, 0, 1], [[1]] * 3, [0, 1, 1], 0, 2, 1)
    calls = []
    monkeypatch.setattr(sel, "prepare", lambda *a, **k: data)
    monkeypatch.setattr(sel, "train_eval", lambda d, h, s, device, max_steps=None: (
        calls.append((h.lr, s)) or {"accuracy": 0.5 + h.lr + s / 100, "test_loss": 0.6,
                                    "train_time_s": 1.0, "steps": 3}))
    hypers = sel.grid([0.1, 0.2], [3], [32])
    sel.run(tmp_path, hypers, [0, 1], incumbent=hypers[0])
    assert calls == [(0.1, 0), (0.2, 0), (0.1, 1), (0.2, 1)]  # every point at seed 0 first
    lines = (tmp_path / sel.SELECT_FILE).read_text().splitlines()
    (tmp_path / sel.SELECT_FILE).write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # killed mid-line
    calls.clear()
    s = sel.run(tmp_path, hypers, [0, 1], incumbent=hypers[0])
    assert calls == [(0.1, 1), (0.2, 1)]
    assert s["chosen"] == sel.hyper_key(hypers[1])
    saved = json.loads((tmp_path / sel.SUMMARY_FILE).read_text())
    assert saved["chosen"] == s["chosen"] and saved["points"][0]["n_seeds"] == 2
    with open(tmp_path / sel.SELECT_FILE, "a") as fh:  # a point pruned after seed 0, from another grid
        fh.write(json.dumps(dict(_rec("lr=0.05 pruned", 0, 0.4), hyper=hypers[0].as_params())) + "\n")
    calls.clear()
    assert sel.main(["--out", str(tmp_path), "--summary-only", "--incumbent", "0.1,3,32"]) == 0
    assert calls == []                                         # summarizes, trains nothing
    saved = json.loads((tmp_path / sel.SUMMARY_FILE).read_text())
    assert [p["point"] for p in saved["points"]][-1] == "lr=0.05 pruned"
    assert saved["chosen"] == s["chosen"] and saved["incumbent"] == sel.hyper_key(hypers[0])


def test_smoke_selection_on_real_weights(tmp_path):
    try:
        fd.corpus_path()
        fd.model_path()
    except fd.DataUnavailable as exc:
        pytest.skip(str(exc))
    pytest.importorskip("transformers")
    s = sel.run(tmp_path, [Hyper(batch_size=8, max_length=32)], [0], train_examples=32, max_steps=2)
    rec = json.loads((tmp_path / sel.SELECT_FILE).read_text().splitlines()[0])
    assert rec["n_val"] > 1000 and rec["n_train"] == 32      # scored on the whole validation split
    assert 0.0 <= rec["accuracy"] <= 1.0 and s["chosen"] == rec["point"]
