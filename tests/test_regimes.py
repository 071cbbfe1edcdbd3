"""The tile-boundary regime covers every boundary class on every run (issue 11): the explicit
examples in ``harness.regimes`` are checked here against the classes, so a later edit that drops
one (say, every key length past 256) fails this test rather than silently losing the coverage."""
from __future__ import annotations

import re
from pathlib import Path

from harness import regimes
from planted_support import suite_file



def _past(values, boundary):
    return any(v > boundary for v in values)


def test_attention_examples_cross_every_tile_boundary():
    agreement = regimes.AGREEMENT
    Ls, Ss = {c.L for c in agreement}, {c.S for c in agreement}
    for tile in (64, 128, 256, 1024):
        assert _past(Ls | Ss, tile), f"no length past {tile}"
    assert _past(Ss, 256) and _past(Ls, 128), "rows past 128 and keys past 256"
    assert any(c.L < c.S for c in agreement) and any(c.L > c.S for c in agreement), "L != S both ways"
    assert {1023, 1024} <= Ls and {1023, 1024} <= Ss, "FlashAttention's (1023, 1024) pair both ways"
    assert max(Ss) >= 2048 and {113, 203} & (Ls | Ss) and any(c.S % 64 for c in agreement if c.S > 64)
    Es = {c.E for c in agreement} | {c.Ev for c in agreement}
    assert _past(Es, 128) and 256 in Es and any(e % 2 for e in Es), "head dims past 128, 256, odd"
    assert any(c.E != c.Ev for c in agreement)
    assert {c.dtype for c in agreement} >= {"float32", "float16", "bfloat16"}


def test_gqa_examples_cover_every_ratio_with_several_kv_heads_and_mqa():
    ratios = {(c.hq // c.hkv, c.hkv > 1) for c in regimes.GQA}
    for ratio in (2, 4, 8):
        assert (ratio, True) in ratios, f"no GQA ratio {ratio} with several KV heads (h // g == h % Hkv otherwise)"
    assert any(c.hkv == 1 and c.hq > 1 for c in regimes.GQA), "no MQA"
    assert max(c.hq for c in regimes.GQA) >= 32


def test_causal_and_window_examples_cross_the_tiles():
    assert _past({c.L for c in regimes.CAUSAL}, 128) and any(c.L < c.S for c in regimes.CAUSAL)
    assert any(c.L > c.S for c in regimes.CAUSAL)
    windows = {(c.window, c.L) for c in regimes.WINDOW}
    assert {w for w, _ in windows} >= {63, 64, 129}, "windows below, at and past a tile"
    assert any(w == L for w, L in windows) and any(w > L for w, L in windows), "window at and past L"
    assert any(w > 128 for w, _ in windows)


def test_mask_examples_can_tell_the_key_axis_from_the_query_axis():
    assert any(c.L == c.S and c.batch[0] > 1 and c.hq > 1 for c in regimes.MASKS)


def test_every_attention_family_property_runs_the_tile_regime():
    """Each attention, sliding-window, RoPE and norm property that draws sizes is decorated with
    ``@covering`` (the dropout probe and the long-context and large-value properties draw their own)."""
    exempt = {"test_attention_dropout.py": {"*"}, "test_rope.py": {"test_frequencies", "test_long_term_decay",
                                                                   "test_long_context", "test_autocast"},
              "test_layernorm.py": {"test_shift_scale_invariance", "test_eps_honoured", "test_large_values",
                                    "test_normalized_dims"},
              "test_rmsnorm.py": {"test_no_mean_subtraction", "test_large_values", "test_normalized_dims"}}
    for suite in ("test_attention.py", "test_attention_masks.py", "test_sliding_window.py", "test_rope.py",
                  "test_layernorm.py", "test_rmsnorm.py"):
        text = suite_file(suite).read_text()
        for m in re.finditer(r"((?:@[^\n]+\n)+)def (test_\w+)\(", text):
            decorators, name = m.group(1), m.group(2)
            if name in exempt.get(suite, set()):
                continue
            assert "@covering(" in decorators, f"{suite}::{name} does not run the tile-boundary regime"
