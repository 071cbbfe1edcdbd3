"""Real latent attention through the MLA suite: transformers' DeepSeek-V3 attention
(``harness.adapters.hf_deepseek_mla``: ``DeepseekV3Attention`` in eager form, as a model calls it)
passes every ``mla`` property it supports, paging and several latent heads reported unsupported; the
same wrapper that leaves the module's own scale in place of the call's fails ``mla.absorbed``
(DeepSeek's explicit (d_nope + Dr)^-0.5 is the reason the scale is a parameter)."""
from __future__ import annotations

import textwrap

from planted_support import conformance, run_suite, suite_tests

ADAPTER = "harness.adapters.hf_deepseek_mla"
SUITE = "test_mla.py"


def test_transformers_deepseek_v3_attention_passes(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, [SUITE], [ADAPTER], None, "--conformance-report", str(report))
    cells = conformance(report)
    assert len([p for p, t in cells if t == ADAPTER]) == len(suite_tests(SUITE))
    for (prop, _), cell in cells.items():
        if prop in ("mla.paged", "mla.kv_heads"):
            assert cell.startswith("unsupported ("), (prop, cell)
        else:
            assert cell == "pass", (prop, cell)
    assert result.parseoutcomes().get("failed", 0) == 0


def test_a_wrapper_that_drops_the_scale_is_caught(pytester, tmp_path):
    wrong = tmp_path / "deepseek_own_scale.py"
    wrong.write_text(textwrap.dedent(f"""
        from {ADAPTER} import HARNESS_DTYPES, HARNESS_UNSUPPORTED, mla_decode as _mla

        def mla_decode(q, kv_cache, cache_seqlens, head_dim_v, scale=None, causal=True):
            return _mla(q, kv_cache, cache_seqlens, head_dim_v, causal=causal)  # the module's own scaling
        """))
    report = tmp_path / "report"
    result = run_suite(pytester, [SUITE], [wrong], "test_absorbed or test_agreement", "--conformance-report", str(report))
    cells = conformance(report)
    assert cells[("mla.agreement", str(wrong))] == "pass"
    assert cells[("mla.absorbed", str(wrong))] == "fail"
    assert "the explicit scale" in result.stdout.str()
