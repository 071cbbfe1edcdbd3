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


def test_hf_chunked_attention_passes_and_a_window_in_its_place_does_not(pytester, tmp_path):
    """transformers' chunked attention path (Llama 4: ``sdpa_mask`` with ``chunked_causal_mask_function``
    and ``sdpa_attention_forward``, ``harness.adapters.hf_chunked_attention``) passes every chunked
    property, a decoding step past a chunk boundary included; the same SDPA with the sliding-window
    mask of the chunk's size in its place fails ``other_chunks``."""
    from planted_support import conformance, run_suite, suite_tests
    report = tmp_path / "report"
    window = ROOT / "tests" / "planted" / "attention" / "chunk_as_sliding_window.py"
    target = "harness.adapters.hf_chunked_attention"
    result = run_suite(pytester, ["test_chunked_attention.py"], [target, str(window)], None,
                       "--conformance-report", str(report))
    cells = conformance(report)
    assert len([p for p, t in cells if t == target]) == len(suite_tests("test_chunked_attention.py"))
    assert all(c == "pass" for (p, t), c in cells.items() if t == target), cells
    assert cells[("chunked_attention.other_chunks", str(window))] == "fail", cells
    assert result.parseoutcomes().get("failed", 0) >= 1


def test_hf_packed_attention_restarts_chunks_per_document(pytester, tmp_path):
    """transformers' packed-sequence masks (``create_chunked_causal_mask`` on position ids that restart
    per document, ``harness.adapters.hf_packed_attention``) pass both chunked varlen properties; the
    planted kernel that counts chunks from the packed row's start fails ``varlen_chunked.agreement``."""
    from planted_support import conformance, run_suite
    report = tmp_path / "report"
    wrong = ROOT / "tests" / "planted" / "varlen" / "chunks_from_packed_start.py"
    target = "harness.adapters.hf_packed_attention"
    run_suite(pytester, ["test_varlen_chunked.py"], [target, str(wrong)], None, "--conformance-report", str(report))
    cells = conformance(report)
    for prop in ("varlen_chunked.agreement", "varlen_chunked.other_chunks"):
        assert cells[(prop, target)].startswith("pass"), cells
    assert cells[("varlen_chunked.agreement", str(wrong))] == "fail", cells
