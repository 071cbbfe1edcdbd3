"""PyTorch's paged attention (``torch.nn.attention.experimental``'s ``PagedAttention`` on eager
``flex_attention``), held to the protocol through ``harness.adapters.torch_kvcache``, passes every
paged, softcap and sinks property and the linear decode properties; what it declares it does not
take (RoPE inside the call, a rolling window) is reported unsupported, not failed."""
from __future__ import annotations

import json

from planted_support import property_of, run_suite, suite_tests

ADAPTER = "harness.adapters.torch_kvcache"
PAGED, LINEAR = "test_paged_kvcache.py", "test_kvcache.py"
DECLARED_OUT = {"test_rotary", "test_rolling_window"}


def test_torch_paged_attention_passes_every_property(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, [PAGED, LINEAR], [ADAPTER], None, "--conformance-report", str(report))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-4000:]
    cells = {(r["property"], r["target"]): r["result"]
             for r in json.loads((report / "conformance.json").read_text())["results"]}
    for suite in (PAGED, LINEAR):
        for test in suite_tests(suite):
            cell = cells[(property_of(suite, test), ADAPTER)]
            if test in DECLARED_OUT:
                assert cell.startswith("unsupported (declared:"), (test, cell)
            else:
                assert cell == "pass", (test, cell)
