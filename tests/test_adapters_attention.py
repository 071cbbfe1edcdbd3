"""Hugging Face transformers' eager attention, held to the protocol through the adapters,
passes every attention property; its finite mask constant is *named* (fully masked rows
attend uniformly), not called a bug."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from planted_support import suite_file

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
SUITES = [suite_file(f) for f in ("test_attention.py", "test_attention_masks.py", "test_attention_dropout.py")]
ADAPTERS = ["harness.adapters.hf_attention", "harness.adapters.hf_bert_attention"]


def test_hf_eager_attention_passes_every_property(pytester, tmp_path):
    report = tmp_path / "report"
    args = [str(s) for s in SUITES] + [a for t in ADAPTERS for a in ("--impl", t)]
    result = pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider", "--hypothesis-profile", "harness-ci",
                                          "--conformance-report", str(report))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-4000:]
    cells = {(r["property"], r["target"]): r["result"]
             for r in json.loads((report / "conformance.json").read_text())["results"]}
    n_properties = sum(len(re.findall(r"^def test_\w+\(", s.read_text(), re.M)) for s in SUITES)
    assert len(cells) == n_properties * len(ADAPTERS)
    assert all(c == "pass" or c.startswith("convention:") for c in cells.values()), cells
    for target in ADAPTERS:
        assert cells[("attention.causal", target)] == "convention:top_left"
        assert cells[("attention.fully_masked_rows", target)] == "convention:uniform"
        assert cells[("attention.gqa", target)] == "pass"
