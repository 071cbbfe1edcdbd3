"""The packed-vs-padded point (``harness bench --suite packing``, harness/bench/packing.py): both
cases run the target's code and count the same real tokens; the figures follow from the lengths.
Tiny profile; no timing assertions (a measured time is only required to be positive)."""
from __future__ import annotations

import json

from harness.bench import packing
from harness.bench.profiles import get
from harness.cli import main as cli_main


def test_figures_follow_from_the_lengths():
    p = {"docs": 6, "median": 20, "sigma": 0.8, "max_len": 64, "heads": 2, "head_dim": 8, "dtype": "float32",
         "seed": 3}
    lens = packing.lengths(p)
    assert lens == packing.lengths(p) and len(lens) == 6 and all(1 <= n <= 64 for n in lens)
    fig = packing.figures(p)
    assert fig["tokens"] == sum(lens) and fig["padded_tokens"] == 6 * max(lens)
    assert fig["work_ratio"] >= 1 and 0 <= fig["padding_fraction"] < 1
    q, k, v, cu, cu_k, mq, mk = packing.packed_inputs(p, "cpu")
    assert q.shape == (sum(lens), 2, 8) and cu.tolist()[-1] == sum(lens) and mq == max(lens)
    *_, mask = packing.padded_inputs(p, "cpu")
    assert mask.shape == (6, 1, max(lens), max(lens)) and int(mask[:, 0, -1].sum()) == sum(lens)


def test_packed_and_padded_points_of_the_reference(tmp_path):
    out = tmp_path / "run"
    assert cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu", "--no-progress",
                     "--impl", "reference", "--suite", "packing"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["case"] for r in rows} == set(packing.CASES)
    assert all(r["status"] == "ok" and r["role"] == "target" for r in rows), rows
    tokens = sum(packing.lengths(packing.params_of(type("C", (), {"profile": get("tiny")})())))
    for r in rows:
        m = r["metrics"]
        assert m["tokens"] == tokens and m["tokens_per_s"] > 0 and m["work_ratio"] >= 1
