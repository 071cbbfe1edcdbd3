"""The ONNX standard's ``Attention`` operator as its reference evaluator computes it
(``harness.adapters.onnx_attention``), held to the protocol: a one-seed slice in CI (the ci
profile), the rest of its properties at random seeds in the sweep (it is a control). Its
conventions are named, not failed; what it declares it does not take is unsupported."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

ADAPTER = "harness.adapters.onnx_attention"
pytestmark = pytest.mark.optional_libs("onnx")

SLICE = nodes(test_attention="test_agreement test_scale test_gqa",
              test_attention_masks="test_causal test_fully_masked_rows", test_sliding_window="test_window_extent",
              test_kvcache="test_ragged_lengths test_rolling_window", test_paged_kvcache="test_sinks",
              test_options_together="test_sdpa test_sliding_window", test_kvcache_pairwise="test_kvcache")


def test_onnx_attention_passes_with_its_conventions_named(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SLICE, [ADAPTER], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == ADAPTER}
    assert cells["attention.causal"] == "convention:top_left"
    assert cells["attention.fully_masked_rows"] == "convention:zeros"
    assert cells["sliding_window.window_extent"] == "convention:w"
    for prop in ("attention.agreement", "attention.scale", "kvcache.ragged_lengths", "options_together.kvcache"):
        assert cells[prop].startswith("pass"), (prop, cells[prop])
    assert cells["kvcache.sinks"].startswith("unsupported (declared:")
    assert "unsupported (NotImplementedError" in cells["kvcache.rolling_window"] or \
        "configs unsupported (NotImplementedError" in cells["kvcache.rolling_window"], cells["kvcache.rolling_window"]


NORMS = "harness.adapters.onnx_norms"
NORM_SLICE = nodes(test_layernorm="test_standardized test_affine", test_rmsnorm="test_eps test_scale_invariance")


def test_onnx_norms_pass_in_float32_with_their_conventions_named(pytester, tmp_path):
    """The standard's LayerNormalization and RMSNormalization (``harness.adapters.onnx_norms``: known-buggy in
    float16, docs/found.md row 6, which tests/test_found.py replays) pass the properties their float16
    statistics do not reach, RMSNormalization's fixed default epsilon named."""
    report = tmp_path / "report"
    result = run_suite(pytester, NORM_SLICE, [NORMS], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == NORMS}
    assert cells == {"layernorm.standardized": "pass", "layernorm.affine": "pass", "rmsnorm.eps": "convention:fixed",
                     "rmsnorm.scale_invariance": "pass"}, cells
