"""The ONNX standard's ``Attention`` operator as its reference evaluator computes it
(``harness.adapters.onnx_attention``), held to the protocol: a one-seed slice in CI (the ci
profile), the rest of its properties at random seeds in the sweep (it is a control). Its
conventions are named, not failed; what it declares it does not take is unsupported."""
from __future__ import annotations

import pytest

from planted_support import conformance, run_suite

ADAPTER = "harness.adapters.onnx_attention"
pytestmark = pytest.mark.optional_libs("onnx")

SLICE = ["test_attention.py", "test_attention_masks.py", "test_sliding_window.py", "test_kvcache.py",
         "test_paged_kvcache.py", "test_options_together.py", "test_kvcache_pairwise.py"]
K = ("test_agreement or test_scale or test_gqa or test_causal or test_fully_masked_rows or test_window_extent "
     "or test_ragged_lengths or test_rolling_window or test_softcap or test_sinks or test_sdpa or test_sliding_window "
     "or test_kvcache")


def test_onnx_attention_passes_with_its_conventions_named(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, SLICE, [ADAPTER], K, "--conformance-report", str(report))
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
