"""onnxruntime's CPU kernels held to the protocol (``harness.adapters.ort_attention``,
``ort_positions``, ``ort_norms``): a one-seed slice in CI (the ci profile); every property at random
seeds is the sweep's (all three are controls). GroupQueryAttention's own cache layouts are the
adapter's to map: a windowed cache (ORT's contiguous rows, its eviction rule) against the
protocol's ring is the slice's rolling-window check."""
from __future__ import annotations

import pytest

from planted_support import conformance, nodes, run_suite

pytestmark = pytest.mark.optional_libs("onnxruntime", "onnx")

ATTENTION = "harness.adapters.ort_attention"
POSITIONS = "harness.adapters.ort_positions"
NORMS = "harness.adapters.ort_norms"
SLICE = nodes(test_attention="test_agreement test_gqa", test_sliding_window="test_window_extent",
              test_kvcache="test_ragged_lengths test_rolling_window test_rotary", test_paged_kvcache="test_sinks",
              test_kvcache_pairwise="test_kvcache", test_rope="test_agreement", test_rope_module="test_call_sequences",
              test_layernorm="test_large_values", test_rmsnorm="test_large_values test_eps")


def test_onnxruntime_kernels_pass_with_their_conventions_named(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SLICE, [ATTENTION, POSITIONS, NORMS], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = conformance(report)
    att = {p: c for (p, t), c in cells.items() if t == ATTENTION}
    for prop in ("attention.agreement", "attention.gqa", "kvcache.ragged_lengths", "kvcache.rotary", "kvcache.sinks",
                 "options_together.kvcache", "kvcache.rolling_window"):
        assert att[prop].startswith(("pass", "convention:w")), (prop, att[prop])
    assert att["sliding_window.window_extent"] == "convention:w"
    assert cells[("rope.agreement", POSITIONS)] == "convention:rotate_half"
    assert cells[("rope_module.call_sequences", POSITIONS)] == "convention:rotate_half"
    # unlike the reference evaluator's (docs/found.md row 6), ORT's float16 statistics are float32
    assert cells[("layernorm.large_values", NORMS)] == "pass"
    assert cells[("rmsnorm.large_values", NORMS)] == "pass"
    assert cells[("rmsnorm.eps", NORMS)] == "convention:fixed"
