"""PyTorch's paged attention (``torch.nn.attention.experimental``'s ``PagedAttention`` on eager
``flex_attention``), held to the protocol through ``harness.adapters.torch_kvcache``.

Eager flex_attention costs ~0.3 s a call on a CPU (its vmapped mask and score functions), so this
self-test replays the paged suite's tile-boundary regime (pages of 256 around 255/257 positions,
of 16 across a tile, of 1; shared prefixes; softcap 1 and 50; sinks with GQA), every property on
each, rather than Hypothesis' draws: those are the sweep's (``harness.controls``: the adapter is a
control, run there at random seeds). What it declares it does not take (RoPE inside the call, a
rolling window) is reported unsupported, not failed.
"""
from __future__ import annotations

import pytest

from harness.boundary.loader import load_target
from harness.verdicts.outcome import Outcome
from harness.runner import run
from planted_support import conformance, nodes, run_suite
from harness.suites.kvcache import configs as kvc
from harness.suites.kvcache import test_paged_kvcache as paged

ADAPTER = "harness.adapters.torch_kvcache"

REGIME = [
    (paged.check_paged_agreement, kvc.PAGED), (paged.check_paged_unfilled_slots, kvc.PAGED_UNFILLED),
    (paged.check_paged_writes, kvc.PAGED + kvc.SHARED), (paged.check_paged_layout_invisible, kvc.PAGED),
    (paged.check_paged_shared_prefix, kvc.SHARED), (paged.check_softcap, kvc.SOFTCAP), (paged.check_sinks, kvc.SINKS),
]

@pytest.fixture(scope="module")
def torch_paged():
    target = load_target(ADAPTER, isolation="none")
    assert target.load_error is None, target.load_error
    yield target
    target.close()

@pytest.mark.parametrize("check,configs", REGIME, ids=[c.__name__.removeprefix("check_") for c, _ in REGIME])
def test_torch_paged_attention_passes_the_regime(torch_paged, check, configs):
    for cfg in configs:
        torch_paged.outcome = Outcome()
        run(torch_paged, check, cfg)  # (a PropertyFailure names the property, the config and the repro)

def test_what_it_declares_out_is_unsupported(pytester, tmp_path):
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_kvcache.py"], [ADAPTER], "test_rotary or test_rolling_window",
                       "--conformance-report", str(report))
    result.assert_outcomes(skipped=2)
    cells = conformance(report)
    for prop in ("kvcache.rotary", "kvcache.rolling_window"):
        assert cells[(prop, ADAPTER)].startswith("unsupported (declared:"), cells


def test_transformers_decoding_attention_passes_with_options_together(pytester, tmp_path):
    """transformers' attention as its models call it at generation (``hf_attention_kvcache``: its
    masking_utils masks; SDPA, Gemma 2's softcap and gpt-oss's sinks eager paths), a one-seed slice:
    every property it takes passes, the covering set of options together included; pages and rotary
    tables are declared out."""
    report = tmp_path / "report"
    target = "harness.adapters.hf_attention_kvcache"
    tests = nodes(test_kvcache="test_decode test_ragged_lengths",
                  test_paged_kvcache="test_softcap test_sinks test_paged_agreement", test_kvcache_pairwise="test_kvcache")
    result = run_suite(pytester, tests, [target], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == target}
    for prop in ("kvcache.decode", "kvcache.ragged_lengths", "kvcache.softcap", "kvcache.sinks",
                 "options_together.kvcache"):
        assert cells[prop].startswith("pass"), (prop, cells[prop])
    assert cells["kvcache.paged_agreement"].startswith("unsupported (declared:")


TORCHTUNE = "harness.adapters.torchtune_kvcache"


@pytest.mark.optional_libs("torchtune")
def test_torchtune_kvcache_passes_what_its_one_cache_position_takes(pytester, tmp_path):
    """torchtune's ``KVCache.update`` with its generation mask: decode and chunked prefill pass; ragged
    lengths (one ``cache_pos`` for the whole batch) are unsupported, never failed."""
    report = tmp_path / "report"
    tests = nodes(test_kvcache="test_decode test_chunked_prefill test_ragged_lengths")
    result = run_suite(pytester, tests, [TORCHTUNE], None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-4000:]
    cells = {p: c for (p, t), c in conformance(report).items() if t == TORCHTUNE}
    assert cells["kvcache.decode"] == "pass" and cells["kvcache.chunked_prefill"] == "pass", cells
    assert cells["kvcache.ragged_lengths"].startswith("unsupported (undeclared: raised NotImplementedError"), cells
