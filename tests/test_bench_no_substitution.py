"""No suite measures torch's kernel under the target's name. Tiny profile; no timing assertions."""
from __future__ import annotations

import json

import pytest

from harness.bench.store import read_jsonl
from harness.cli import main as cli_main
from harness.verdicts.runfolder import locked_by


def bench(out, *extra) -> int:
    return cli_main(["bench", "--out", str(out), "--profile", "tiny", "--device", "cpu",
                     "--no-progress", *extra])


NO_SDPA = '''
from harness.reference.sliding_window import sliding_window_attention
'''


def test_no_suite_runs_torch_under_the_targets_name(tmp_path):
    """A target without scaled_dot_product_attention: the KV-cache decoder and the HF Mistral stack
    (which would fall back to torch's SDPA) are skipped with the reason, not recorded as ok."""
    pytest.importorskip("transformers")
    target = tmp_path / "window_only.py"
    target.write_text(NO_SDPA)
    out = tmp_path / "run"
    assert bench(out, "--impl", str(target), "--suite", "kv_cache,receptive_field",
                 "--cases", "mha,rolling_window,hf_mistral,target.sliding_window") == 0
    rows = read_jsonl(out / "results.jsonl")
    by_case = {}
    for r in rows:
        by_case.setdefault(r["case"], set()).add(r["status"])
    assert by_case == {"mha": {"skipped"}, "rolling_window": {"skipped"}, "hf_mistral": {"skipped"},
                       "target.sliding_window": {"ok"}}
    for r in rows:
        assert r["role"] == "target" and "@window_only.py|" in r["key"]
        if r["status"] == "skipped":
            assert "scaled_dot_product_attention" in r["reason"]
    env = json.loads((out / "env.json").read_text())
    assert env["cases"] == ["mha", "rolling_window", "hf_mistral", "target.sliding_window"]
    assert locked_by(out) is None  # the bench released its lock
