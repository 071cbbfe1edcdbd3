"""x-transformers' attention kernel, its ``Attend`` module (``harness.adapters.xtransformers_attention``),
held to the protocol: a one-seed slice in CI; every property at random seeds is the sweep's (a
control). Its conventions are named (bottom-right causal, zeros for masked rows), and its
strided GQA grouping is a layout the adapter maps: the GQA and KV-cache checks below fail if the
mapping is wrong (query head h would read key/value head h mod Hkv)."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

ADAPTER = "harness.adapters.xtransformers_attention"
pytestmark = pytest.mark.optional_libs("x_transformers")

SLICE = nodes(test_attention="test_gqa", test_attention_masks="test_causal test_fully_masked_rows test_mask_shapes",
              test_attention_grad="test_gqa", test_kvcache="test_ragged_lengths", test_paged_kvcache="test_sinks")


def test_xtransformers_attend_passes_with_its_conventions_named(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SLICE, [ADAPTER], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == ADAPTER}
    assert cells["attention.causal"].startswith("convention:bottom_right"), cells["attention.causal"]
    assert cells["attention.fully_masked_rows"] == "convention:zeros"
    for prop in ("attention.gqa", "attention.mask_shapes", "attention_grad.gqa", "kvcache.ragged_lengths",
                 "kvcache.sinks"):
        assert cells[prop].startswith("pass"), (prop, cells[prop])
