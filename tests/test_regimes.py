"""The tile-boundary regime covers every boundary class on every run (issue 11): the explicit
examples in ``suites.regimes`` are checked here against the classes, so a later edit that drops
one (say, every key length past 256) fails this test rather than silently losing the coverage."""
from __future__ import annotations

import re
from pathlib import Path

from harness.suites import regimes
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


def test_varlen_examples_join_sequences_at_every_tile_edge():
    """Packed sequences: joins (a sequence's first row) at 63/64/65 and 127/128/129 in the tile
    regime, zero-length sequences first, between and last, causal Lq != Lk both ways past a tile."""
    joins = {sum(c.q_lens[:i]) for c in regimes.VARLEN_TILES for i in range(1, len(c.q_lens))}
    assert {63, 64, 65, 127, 128, 129} <= joins, sorted(joins)
    zero = [(c.q_lens, c.k_lens) for c in regimes.VARLEN_ZERO]
    assert any(q[0] == 0 for q, _ in zero) and any(0 in q[1:-1] for q, _ in zero) and any(k[-1] == 0 for _, k in zero)
    pairs = [(a, b) for c in regimes.VARLEN_CAUSAL for a, b in zip(c.q_lens, c.k_lens)]
    assert any(a < b for a, b in pairs) and any(a > b for a, b in pairs) and max(map(max, pairs)) > 128


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
                  "test_layernorm.py", "test_rmsnorm.py", "test_varlen.py"):
        text = suite_file(suite).read_text()
        for m in re.finditer(r"((?:@[^\n]+\n)+)def (test_\w+)\(", text):
            decorators, name = m.group(1), m.group(2)
            if name in exempt.get(suite, set()):
                continue
            assert "@covering(" in decorators, f"{suite}::{name} does not run the tile-boundary regime"


#: the gradient suites: each test either runs a tile-boundary regime (the expression in its
#: ``@covering(...)``) or is exempt for a stated reason; a new test must be put in one of the two
GRAD_COVERED = {
    "test_attention_grad.py": {"test_agreement": "regimes.GRAD", "test_causal": "regimes.GRAD_CAUSAL",
                               "test_gqa": "regimes.GRAD_GQA", "test_deterministic": "regimes.GRAD",
                               "test_fully_masked_rows": "regimes.GRAD"},
    "test_window_grad.py": {"test_agreement": "regimes.GRAD_WINDOW", "test_outside_window": "regimes.GRAD_WINDOW"},
    "test_norm_grad.py": {"test_layernorm": "regimes.NORMS[:2]", "test_rmsnorm": "regimes.NORMS[:2]"},
    "test_position_grad.py": {"test_rope_dx": "regimes.ROPE[1:3]"},
    "test_dropout_grad.py": {},
    "test_varlen_grad.py": {"test_agreement": "regimes.VARLEN_GRAD", "test_isolation": "regimes.VARLEN_GRAD"},
}
GRAD_EXEMPT = {  # (suite, test): why it draws no tile-boundary regime
    ("test_attention_grad.py", "test_scale"): "the scale enters every tile alike: agreement covers the tiles",
    ("test_attention_grad.py", "test_value_shift"): "an algebraic identity of the row sums, per row",
    ("test_attention_grad.py", "test_bool_mask"): "small masks; the masks' tiles are attention.mask_shapes'",
    ("test_attention_grad.py", "test_float_mask"): "as bool_mask",
    ("test_attention_grad.py", "test_gradcheck"): "float64 Jacobians: tiny shapes only",
    ("test_dropout_grad.py", "test_dropout_mask"): "the dropout probe draws its own sizes (S x S identity)",
    ("test_dropout_grad.py", "test_dropout_scaling"): "as dropout_mask",
    ("test_norm_grad.py", "test_shift_invariance"): "an identity per token; layernorm covers the widths",
    ("test_norm_grad.py", "test_residual_block"): "a dim x dim sublayer: the widths are layernorm's",
    ("test_norm_grad.py", "test_gradcheck"): "float64 Jacobians: tiny shapes only",
    ("test_position_grad.py", "test_rope_inverse"): "an identity per pair; rope_dx covers the sizes",
    ("test_position_grad.py", "test_embedding_sum"): "a table lookup has no tiles",
    ("test_position_grad.py", "test_gradcheck"): "float64 Jacobians: tiny shapes only",
}


def _decorated_tests(suite: str) -> dict[str, str]:
    """test name -> its decorator lines."""
    text = (suite_file(suite)).read_text()
    return {m.group(2): m.group(1) for m in re.finditer(r"((?:@[^\n]+\n)+)def (test_\w+)\(", text)}


def test_every_gradient_property_runs_its_tile_regime_or_says_why_not():
    for suite, covered in GRAD_COVERED.items():
        for name, decorators in _decorated_tests(suite).items():
            if name in covered:
                assert f"@covering({covered[name]})" in decorators, \
                    f"{suite}::{name} no longer runs {covered[name]}"
            else:
                assert (suite, name) in GRAD_EXEMPT, f"{suite}::{name}: add @covering(...) or a reason to GRAD_EXEMPT"
    listed = {(s, t) for s, c in GRAD_COVERED.items() for t in c} | set(GRAD_EXEMPT)
    assert listed == {(s, t) for s in GRAD_COVERED for t in _decorated_tests(s)}, "stale entries"


def _grad_regime(expr: str):
    return tuple(eval(expr, {"regimes": regimes}))  # noqa: S307 - an expression from the table above


def test_gradient_examples_cross_the_tiles():
    """Each gradient regime keeps its boundary classes: rows past 64 and 128, a ragged key block
    past 128, L != S, a head dim past 128, a half dtype; causal with L <= S past a tile and L < S;
    GQA with several KV heads at a ratio >= 4 and MQA; windows below and past a tile with L < S;
    norms past 1024 features in a half dtype; RoPE past 128 positions and head dims."""
    grad = _grad_regime(GRAD_COVERED["test_attention_grad.py"]["test_agreement"])
    assert _past({c.L for c in grad}, 128) and any(c.S > 128 and c.S % 64 for c in grad), "past the tiles"
    assert any(c.L != c.S for c in grad) and _past({c.E for c in grad}, 128), "L != S, E past 128"
    assert {c.dtype for c in grad} & {"float16", "bfloat16"}
    causal = _grad_regime(GRAD_COVERED["test_attention_grad.py"]["test_causal"])
    assert all(c.L <= c.S for c in causal) and any(c.L < c.S for c in causal) and _past({c.L for c in causal}, 128)
    gqa = _grad_regime(GRAD_COVERED["test_attention_grad.py"]["test_gqa"])
    assert any(c.hq // c.hkv >= 4 and c.hkv > 1 for c in gqa) and any(c.hkv == 1 and c.hq > 1 for c in gqa)
    assert _past({max(c.L, c.S) for c in gqa}, 64)
    window = _grad_regime(GRAD_COVERED["test_window_grad.py"]["test_agreement"])
    assert any(c.window < 64 for c in window) and any(c.window > 128 for c in window), "windows below / past a tile"
    assert any(c.L < c.S for c in window) and _past({c.L for c in window}, 128)
    norms = _grad_regime(GRAD_COVERED["test_norm_grad.py"]["test_layernorm"])
    assert _past({c.features for c in norms}, 1024) and _past({c.features for c in norms}, 4096)
    assert {c.dtype for c in norms} & {"float16", "bfloat16"}
    rope = _grad_regime(GRAD_COVERED["test_position_grad.py"]["test_rope_dx"])
    assert _past({c.L for c in rope}, 128) and _past({c.D for c in rope}, 128)
    assert {c.dtype for c in rope} & {"float16", "bfloat16"}
