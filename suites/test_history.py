"""History independence of every protocol function: the same call gives the same answer after any
other calls of the same name (long then short, an offset then none, other dtypes, batch sizes and
scales). One property per function, ``history.<name>``; how a history is drawn and judged:
``suites/histories.py``.

Each property draws a first call, 1-3 other calls (sharing the first call's identity fields --
the table below's ``keep`` -- with probability 1/2 each) and the first call again, and judges
every call with the family's single-call check named beside it (the float64 reference under the
tolerance policy), or, for the generator-driven samplers, the repeat against the first call
exactly. The factories ``build_model`` and ``build_bert`` are not here: each call builds a new
model, whose own calls ``models.dependency`` and ``models.param_count`` check.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness import tolerance
from harness.configs import HistoryConfig
from harness.suites.kit import impl, run
from harness.suites.histories import examples, histories, replay, replay_same
from harness.suites.attention import test_attention as attention, test_sliding_window as sliding_window, test_varlen as varlen
from harness.suites.attention.configs import VarlenConfig, attn_configs, varlen_configs, window_configs
from harness.suites.bert import test_distillation as distillation, test_models as models
from harness.suites.bert.configs import (NO_SHRINK, distill_configs, embedding_configs, inputs_configs, mlm_configs,
                                 nsp_configs, span_configs)
from harness.suites.bert.test_mlm import call_mask
from harness.suites.bert.test_span_corruption import call_span
from harness.suites.kvcache import configs as kvc, test_kvcache as kvcache
from harness.suites.norms import test_norm_placement as norm_placement
from harness.suites.norms.configs import norm_configs, wide_dtypes
from harness.suites.positions import (test_alibi as alibi, test_rope as rope, test_sinusoidal as sinusoidal,
                              test_t5_bias as t5_bias, test_t5_bucket as t5_bucket)
from harness.suites.positions.configs import (RopeConfig, alibi_configs, rope_configs, sinusoidal_configs, t5_bias_configs,
                                      t5_bucket_configs)
from harness.suites.rope_scaling import test_rope_scaling as rope_scaling
from harness.suites.rope_scaling.configs import scaling_configs

PROPERTY_PREFIX = "history"


@st.composite
def rope_calls(draw):
    """RoPE calls where a positions cache is used: mostly contiguous positions ``offset +
    arange(L)``, shared (L,), from 0 or a small offset (rotary-embedding-torch caches up to 8192)."""
    cfg = draw(rope_configs())
    offset = draw(st.sampled_from([0, 0, 1, 2]).flatmap(lambda k: st.just(0) if k == 0 else (
        st.integers(1, 64) if k == 1 else st.integers(65, 4000))))  # 0 half the time
    return dataclasses.replace(cfg, spread=draw(st.sampled_from([0, 0, 0, 8])),
                               per_batch=draw(st.sampled_from([False, False, False, True])), offset=offset)


def _rope_history(*calls: RopeConfig) -> HistoryConfig:
    return HistoryConfig(name="apply_rotary_embedding", calls=tuple(c.to_json() for c in calls))


_ROPE = RopeConfig(batch=1, heads=2, L=8, D=16, dtype="float32", base=10000.0, offset=0, spread=0,
                   per_batch=False, shift=0, seed=1)
#: histories aimed at a positions cache by construction, run first on every profile (random draws
#: hit an offset cache in ~13 % of histories, so whether a profile's few examples find one would
#: depend on the draw): the same call from offset 0 after one at an offset that needs more rows
#: than cached (an offset cache stores the rows of positions o.. as rows 0..), after a longer one,
#: and after the same call in another dtype
ROPE_HISTORIES = (
    _rope_history(_ROPE, dataclasses.replace(_ROPE, offset=3, L=12, seed=2), _ROPE),
    _rope_history(_ROPE, dataclasses.replace(_ROPE, L=40, seed=3), dataclasses.replace(_ROPE, L=5, seed=4)),
    _rope_history(_ROPE, dataclasses.replace(_ROPE, dtype="bfloat16", offset=2, seed=5)),
)


def sinusoidal_table(target, cfg):
    """The whole (num_positions, dim) table equals the float64 formula in the measured layout."""
    layout = sinusoidal.table_layout(target, cfg)
    N, d = cfg.num_positions, cfg.dim
    pe = sinusoidal.call_pe(target, N, d)
    tolerance.assert_close(pe, sinusoidal.truth(N, d, layout), sinusoidal.naive(N, d, layout, pe.dtype),
                           dtype=pe.dtype, what=f"sinusoidal table ({N} positions, dim {d}, {layout})")


def mask_once(target, cfg):
    ids, special = cfg.batch()
    return call_mask(target, cfg, ids, special, torch.Generator().manual_seed(cfg.seed % 2**31))


def span_once(target, cfg):
    return call_span(target, cfg, cfg.tokens(), torch.Generator().manual_seed(cfg.seed % 2**31))


def nsp_once(target, cfg):
    pairs = impl(target, "make_nsp_pairs")(cfg.corpus(), min(cfg.pairs, 256), generator=cfg.generator(1))
    return [[torch.as_tensor(list(a)), torch.as_tensor(list(b)), int(label)] for a, b, label in pairs]


# -- positions -----------------------------------------------------------------------------------

def check_apply_rotary_embedding(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by ``rope.agreement``
    (mostly contiguous positions from offset 0 or a small offset)."""
    replay(target, cfg, rope.check_agreement)


def check_sinusoidal_position_embedding(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by the whole table
    against the float64 formula (in the measured layout)."""
    replay(target, cfg, sinusoidal_table)


def check_alibi_slopes(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by ``alibi.slopes``."""
    replay(target, cfg, alibi.check_slopes)


def check_alibi_bias(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``alibi.end_alignment``."""
    replay(target, cfg, alibi.check_end_alignment)


def check_t5_relative_position_bucket(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``t5_bucket.mesh_tf``."""
    replay(target, cfg, t5_bucket.check_mesh_tf)


def check_t5_relative_position_bias(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by ``t5_bias.lookup``."""
    replay(target, cfg, t5_bias.check_lookup)


@pytest.mark.needs("apply_rotary_embedding")
@examples()
@example(cfg=ROPE_HISTORIES[0])
@example(cfg=ROPE_HISTORIES[1])
@example(cfg=ROPE_HISTORIES[2])
@given(cfg=histories("apply_rotary_embedding", rope_calls(), keep=(("D", "base"), "dtype"),
                     vary=("offset", "L", "dtype", ("batch", "heads"), ("spread", "per_batch"))))
def test_apply_rotary_embedding(target, cfg):
    run(target, check_apply_rotary_embedding, cfg)


@pytest.mark.needs("sinusoidal_position_embedding")
@examples()
@given(cfg=histories("sinusoidal_position_embedding", sinusoidal_configs(), keep=("dim",)))
def test_sinusoidal_position_embedding(target, cfg):
    run(target, check_sinusoidal_position_embedding, cfg)


@pytest.mark.needs("alibi_slopes")
@examples()
@given(cfg=histories("alibi_slopes", alibi_configs()))
def test_alibi_slopes(target, cfg):
    run(target, check_alibi_slopes, cfg)


@pytest.mark.needs("alibi_bias")
@examples()
@given(cfg=histories("alibi_bias", alibi_configs(), keep=("heads",)))
def test_alibi_bias(target, cfg):
    run(target, check_alibi_bias, cfg)


@pytest.mark.needs("t5_relative_position_bucket")
@examples()
@given(cfg=histories("t5_relative_position_bucket", t5_bucket_configs(), keep=(("num_buckets", "max_distance"),)))
def test_t5_relative_position_bucket(target, cfg):
    run(target, check_t5_relative_position_bucket, cfg)


@pytest.mark.needs("t5_relative_position_bias")
@examples()
@given(cfg=histories("t5_relative_position_bias", t5_bias_configs(square=True),
                     keep=(("heads", "num_buckets", "max_distance", "bidirectional"),)))
def test_t5_relative_position_bias(target, cfg):
    run(target, check_t5_relative_position_bias, cfg)


#: dynamic NTK past the original length, then the same rule at the original length (run first on every
#: profile: a grown base that is kept shows at the second call)
ROPE_SCALING_HISTORY = HistoryConfig(name="rope_frequencies", calls=tuple(c.to_json() for c in (
    rope_scaling.DYNAMIC, dataclasses.replace(rope_scaling.DYNAMIC, seq_len=1024))))


def check_rope_frequencies(target, cfg):
    """Each call of the history (a first call, 1-3 others -- half of them the first at another sequence
    length -- the first again) is judged by ``rope_scaling.agreement``: a dynamic base grown for a long
    sequence must not stay for a shorter one."""
    replay(target, cfg, rope_scaling.check_agreement)


@pytest.mark.needs("rope_frequencies")
@examples()
@example(cfg=ROPE_SCALING_HISTORY)
@given(cfg=histories("rope_frequencies", scaling_configs(), keep=(("rule", "dim", "partial", "base", "factor", "orig"),),
                     vary=("seq_len",)))
def test_rope_frequencies(target, cfg):
    run(target, check_rope_frequencies, cfg)


# -- attention, KV cache, norms --------------------------------------------------------------------

def check_scaled_dot_product_attention(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``attention.agreement``."""
    replay(target, cfg, attention.check_agreement)


def check_sliding_window_attention(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``sliding_window.window_agreement``."""
    replay(target, cfg, sliding_window.check_window_agreement)


def check_attention_with_kvcache(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by ``kvcache.decode``."""
    replay(target, cfg, kvcache.check_decode)


def check_attention_varlen(target, cfg):
    """Each call of the history (a first call, 1-3 others -- half of them the first call's tokens split
    into other sequences -- the first again) is judged by ``varlen.agreement``."""
    replay(target, cfg, varlen.check_agreement)


def check_residual_block(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``norm_placement.placement``."""
    replay(target, cfg, norm_placement.check_placement)


@pytest.mark.needs("scaled_dot_product_attention")
@examples()
@given(cfg=histories("scaled_dot_product_attention", attn_configs(), keep=(("hq", "hkv", "E", "Ev"), "dtype")))
def test_scaled_dot_product_attention(target, cfg):
    run(target, check_scaled_dot_product_attention, cfg)


@pytest.mark.needs("sliding_window_attention")
@examples()
@given(cfg=histories("sliding_window_attention", window_configs(), keep=("window", "dtype"), vary=("window",)))
def test_sliding_window_attention(target, cfg):
    run(target, check_sliding_window_attention, cfg)


@pytest.mark.needs("attention_with_kvcache")
@examples()
@given(cfg=histories("attention_with_kvcache", kvc.decode_configs()))
def test_attention_with_kvcache(target, cfg):
    run(target, check_attention_with_kvcache, cfg)


@st.composite
def _split(draw, total: int, parts: int) -> tuple[int, ...]:
    """``total`` tokens split into ``parts`` sequences of at least one token each."""
    cuts = draw(st.lists(st.integers(1, total - 1), min_size=parts - 1, max_size=parts - 1, unique=True)) \
        if parts > 1 else []
    bounds = [0, *sorted(cuts), total]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


@st.composite
def _split_anew(draw, first: VarlenConfig) -> VarlenConfig:
    """``first``'s tokens split into 1-4 other sequences: the same total_q and total_k, heads and dtype
    (where a mask or index cache keyed on the packed shape is hit); keys split as the queries where
    they were equal."""
    parts = draw(st.integers(1, min(4, first.total_q, first.total_k)))
    q_lens = draw(_split(first.total_q, parts))
    k_lens = q_lens if first.k_lens == first.q_lens else draw(_split(first.total_k, parts))
    return dataclasses.replace(first, q_lens=q_lens, k_lens=k_lens, seed=draw(st.integers(0, 2**31)))


_VARLEN = VarlenConfig(q_lens=(3, 5), k_lens=(3, 5), hq=2, hkv=2, E=8, Ev=8, dtype="float32", seed=1, causal=True)
#: the same packed shape split the other way round, then the first call again (run first on every profile)
VARLEN_HISTORY = HistoryConfig(name="attention_varlen", calls=tuple(c.to_json() for c in (
    _VARLEN, dataclasses.replace(_VARLEN, q_lens=(5, 3), k_lens=(5, 3), seed=2))))


@pytest.mark.needs("attention_varlen")
@examples()
@example(cfg=VARLEN_HISTORY)
@given(cfg=histories("attention_varlen", varlen_configs(), keep=(("hq", "hkv", "E", "Ev"), "dtype"), variant=_split_anew))
def test_attention_varlen(target, cfg):
    run(target, check_attention_varlen, cfg)


@pytest.mark.needs("residual_block")
@examples()
@given(cfg=histories("residual_block", norm_configs(dtypes=wide_dtypes(), max_ns_dims=1, min_features=2),
                     keep=("normalized_shape", "dtype")))
def test_residual_block(target, cfg):
    run(target, check_residual_block, cfg)


# -- BERT-family objectives and inputs --------------------------------------------------------------

def check_distillation_loss(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``distillation.agreement``."""
    replay(target, cfg, distillation.check_agreement)


def check_build_inputs(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``models.special_placement``."""
    replay(target, cfg, models.check_special_placement)


def check_bert_embeddings(target, cfg):
    """Each call of the history (a first call, 1-3 others, the first again) is judged by
    ``models.embedding_sum``."""
    replay(target, cfg, models.check_embedding_sum)


def check_mask_tokens(target, cfg):
    """A sampler: the repeat of the first call after 1-3 others (same generator seed) equals what the first
    call gave, exactly."""
    replay_same(target, cfg, mask_once)


def check_span_corruption(target, cfg):
    """A sampler: the repeat of the first call after 1-3 others (same generator seed) equals what the first
    call gave, exactly."""
    replay_same(target, cfg, span_once)


def check_make_nsp_pairs(target, cfg):
    """A sampler: the repeat of the first call after 1-3 others (same generator seed) equals what the first
    call gave, exactly (256 pairs)."""
    replay_same(target, cfg, nsp_once)


@pytest.mark.needs("distillation_loss")
@examples()
@given(cfg=histories("distillation_loss", distill_configs(), keep=("classes", "dtype")))
def test_distillation_loss(target, cfg):
    run(target, check_distillation_loss, cfg)


@pytest.mark.needs("build_inputs")
@examples(phases=NO_SHRINK)
@given(cfg=histories("build_inputs", inputs_configs()))
def test_build_inputs(target, cfg):
    run(target, check_build_inputs, cfg)


@pytest.mark.needs("bert_embeddings")
@settings(max_examples=5, phases=NO_SHRINK)
@given(cfg=histories("bert_embeddings", embedding_configs(), keep=(("vocab_size", "hidden_size"),)))  # (length <= max_positions: drawn together)
def test_bert_embeddings(target, cfg):
    run(target, check_bert_embeddings, cfg)


@pytest.mark.needs("mask_tokens")
@examples(phases=NO_SHRINK)
@given(cfg=histories("mask_tokens", mlm_configs("small"), keep=(("rows", "length"), ("vocab_size", "mask_token_id"), "mlm_probability")))
def test_mask_tokens(target, cfg):
    run(target, check_mask_tokens, cfg)


@pytest.mark.needs("span_corruption")
@examples(phases=NO_SHRINK)
@given(cfg=histories("span_corruption", span_configs(), keep=(("noise_density", "mean_span_length"),)))
def test_span_corruption(target, cfg):
    run(target, check_span_corruption, cfg)


@pytest.mark.needs("make_nsp_pairs")
@settings(max_examples=5, phases=NO_SHRINK)
@given(cfg=histories("make_nsp_pairs", nsp_configs()))
def test_make_nsp_pairs(target, cfg):
    run(target, check_make_nsp_pairs, cfg)
