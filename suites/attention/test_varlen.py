"""Attention over packed sequences: ``attention_varlen`` (FlashAttention's varlen contract).

Protocol (harness/spec/protocol.py, reference/attention_varlen.py): q (total_q, Hq, E), k/v (total_k,
Hkv, E|Ev), cu_seqlens_q/k (B + 1,) int32; every query attends only to its own sequence's keys,
at position i + Lk - Lq (bottom-right per sequence). The properties hold packing to what it must
equal: dense attention run on each sequence alone (the float64 reference, per sequence), whatever
the other sequences hold (+-1e4), where they start within a tile, how many are empty, how the heads
are grouped, with a window, softcap or sinks; and RoPE on position ids that restart per document
gives each document's rows as if it ran alone. The tile-boundary regime (``suites.regimes``,
``VARLEN*``) puts the joins between sequences at 63/64/65 and 127/128/129.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.suites import regimes
from harness.suites.kit import expect_tensor, impl, require_features, run, under_convention
from harness.suites.regimes import covering
from harness.reference.attention_varlen import bounds, sequence_math
from harness.reference.masks import causal_mask
from harness.suites.attention import configs as ac
from harness.suites.attention import varlen_helpers as vh
from harness.suites.positions.helpers import rope_naive, rope_truth
from harness.reference.rope import LAYOUTS

PROPERTY_PREFIX = "varlen"
pytestmark = pytest.mark.needs(vh.VARLEN)
#: a third of the profile's examples, at least 8 (ci and dev: 10; thorough: 100): each draws up to 4
#: sequences, and the tile-join regime's explicit examples run first on every profile anyway
EXAMPLES = settings(max_examples=max(8, settings.default.max_examples // 3))


def _out(target, cfg, **kw):
    q, k, v = cfg.qkv(target.device)
    return q, k, v, vh.call_varlen(target, cfg, q, k, v, **kw)


def check_agreement(target, cfg):
    """The packed output equals dense attention run on each sequence alone (float64 reference)."""
    q, k, v, out = _out(target, cfg)
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}: against dense attention run per sequence")


def check_isolation(target, cfg):
    """Rewriting every other sequence (its queries, keys and values to +-1e4; float16 queries and keys
    shrunk so no raw score passes a quarter of its max) changes no output row of the sequences left
    alone: no query sees another sequence's keys, no tile mixes rows."""
    q, k, v = cfg.qkv(target.device)
    B = len(cfg.q_lens)
    kept = {b for b in range(B) if b % 2 == cfg.seed % 2}
    q2, k2, v2 = vh.rewrite(cfg, q, k, v, set(range(B)) - kept, cfg.generator(salt=7))
    out = vh.call_varlen(target, cfg, q2, k2, v2)
    rows = vh.rows_of(cfg.cu_seqlens()[0], kept, cfg.total_q)
    try:
        vh.agree(out, cfg, q2, k2, v2, "output", rows=rows)
    except AssertionError as exc:
        raise AssertionError(f"{vh.describe(cfg)}: sequences {sorted(set(range(B)) - kept)} rewritten to +-1e4 "
                             f"changed the rows of sequences {sorted(kept)}: {exc}") from None


def _top_left(cfg, q, k, v):
    """Per sequence causal with the top-left alignment (query i sees keys j <= i): the diagnosis."""
    cu_q, cu_k = cfg.cu_seqlens()
    out = torch.zeros(cfg.total_q, cfg.hq, cfg.Ev, dtype=torch.float64)
    for (qs, qe), (ks, ke) in zip(bounds(cu_q), bounds(cu_k)):
        if qe > qs:
            vis = causal_mask(qe - qs, ke - ks, "top_left")
            seq = sequence_math(q[qs:qe].cpu().transpose(0, 1), k[ks:ke].cpu().transpose(0, 1),
                                v[ks:ke].cpu().transpose(0, 1), vis)
            out[qs:qe] = seq.transpose(0, 1)
    return out


def check_causal(target, cfg):
    """Causal with Lq != Lk in a sequence: its query i sits at i + Lk - Lq of ITS OWN sequence
    (bottom-right per sequence, not per batch, not top-left); rows that see no key are zeros."""
    q, k, v, out = _out(target, cfg)
    try:
        vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}: against causal bottom-right per sequence")
    except AssertionError as exc:
        if tolerance.compare(out.cpu(), _top_left(cfg, q, k, v), vh.naive(cfg, q, k, v), dtype=q.dtype).ok:
            raise AssertionError(f"{exc}\n  it matches the top-left alignment per sequence (query i sees keys j <= i); "
                                 f"the protocol aligns each sequence's queries to the end of its keys") from None
        raise


def check_zero_length(target, cfg):
    """Zero-length sequences (queries, keys or both) anywhere in the batch: every other sequence
    is read from its own cu_seqlens entries; queries with no key give zero rows."""
    q, k, v, out = _out(target, cfg)
    empty = [b for b, (a, c) in enumerate(zip(cfg.q_lens, cfg.k_lens)) if not a or not c]
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)} (sequences {empty} empty on one side or both)")


def check_tile_offsets(target, cfg):
    """Sequences that start at any offset within a tile (a first sequence of 0 ... 129 rows; joins
    at 63/64/65 and 127/128/129 in the regime) equal dense attention run on each alone."""
    q, k, v, out = _out(target, cfg)
    starts = cfg.cu_seqlens()[0].tolist()[:-1]
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)} (sequences start at rows {starts})")


def check_gqa(target, cfg):
    """Hq = g * Hkv: query head h of every sequence reads KV head h // g of the same sequence."""
    q, k, v, out = _out(target, cfg)
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}, Hq={cfg.hq}, Hkv={cfg.hkv}")


def check_window(target, cfg):
    """A window w per sequence, positions bottom-right in each: query i sees keys j with
    position - w < j (and j <= position, causal). The extent is measured (w, or w+1 named: the
    ``window_extent`` convention, as ``attention_with_kvcache``'s rolling window). A target may declare
    ``varlen_window`` unsupported."""
    q, k, v, out = _out(target, cfg)
    what = f"{vh.describe(cfg)}: against the window per sequence"
    under_convention(target, "window_extent",
                     lambda extent: vh.agree(out, cfg, q, k, v, f"{what} ({extent})", extent=extent), what)


def check_softcap(target, cfg):
    """softcap: the scaled scores become softcap * tanh(scores / softcap) before the mask
    (Gemma 2); caps 0.5 ... 30, so most scores are capped. A target may declare ``softcap`` unsupported."""
    q, k, v, out = _out(target, cfg)
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}, softcap {cfg.softcap}")


def check_sinks(target, cfg):
    """sinks (Hq,): one logit per QUERY head (GQA drawn too) in each row's softmax denominator, no
    value (gpt-oss); drawn N(0, 2^2). A target may declare ``sinks`` unsupported."""
    q, k, v, out = _out(target, cfg)
    vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}, sinks {cfg.sink_logits().tolist()[:4]}...")


def _rotate(target, x, positions):
    """The target's apply_rotary_embedding on packed rows x (T, H, E) at ``positions`` (T,)."""
    xh = x.transpose(0, 1)[None].contiguous()  # (1, H, T, E)
    out = expect_tensor(impl(target, "apply_rotary_embedding")(xh, positions), "apply_rotary_embedding",
                        tuple(xh.shape), x.dtype, x.device)
    return out[0].transpose(0, 1).contiguous()


def _rope_same(a, b, x, pos, what):
    """Two of the target's rotations of x at ``pos`` that must be equal: within twice the rope
    policy's allowance (the worse layout's rounding, as the consistency check of RoPE)."""
    xh, p = x.transpose(0, 1)[None].cpu(), pos.cpu()
    ref = rope_truth(xh, p, 10000.0, "rotate_half")
    nai = tolerance.worst_naive(ref, [rope_naive(xh, p, 10000.0, lay) - rope_truth(xh, p, 10000.0, lay) + ref
                                      for lay in LAYOUTS])
    allowed = 2 * tolerance.allowance(ref, nai, dtype=x.dtype)
    diff = (a.double().cpu() - b.double().cpu()).abs().nan_to_num(float("inf"))
    if diff.numel() and float(diff.max()) > allowed:
        row = int((diff == diff.max()).nonzero()[0][0])
        raise AssertionError(f"{what}: row {row} differs by {float(diff.max()):.3e} (allowed {allowed:.3e})")


def check_rope_packed(target, cfg):
    """Packed documents with position ids that restart at 0 per document (Hugging Face's
    DataCollatorWithFlattening): the target's apply_rotary_embedding on the packed rows, then
    attention_varlen, gives each document's rows exactly as the document run alone (rotated at
    0 ... L - 1, one sequence): both the rotated q/k rows and the attention output."""
    require_features(target, *vh.features_of(cfg))
    q, k, v = cfg.qkv(target.device)
    pos = torch.cat([torch.arange(n) for n in cfg.q_lens]).to(target.device)
    qr, kr = _rotate(target, q, pos), _rotate(target, k, pos)
    out = vh.call_varlen(target, cfg, qr, kr, v)
    cu = cfg.cu_seqlens()[0].tolist()
    for b, n in enumerate(cfg.q_lens):
        s, e = cu[b], cu[b + 1]
        one = replace(cfg, q_lens=(n,), k_lens=(n,))
        ar = torch.arange(n, device=target.device)
        qa, ka = _rotate(target, q[s:e], ar), _rotate(target, k[s:e], ar)
        what = f"{vh.describe(cfg)}: document {b} (rows {s} ... {e - 1}, positions 0 ... {n - 1})"
        _rope_same(qr[s:e], qa, q[s:e], ar, f"{what}: q rotated in the packed row against the document alone")
        _rope_same(kr[s:e], ka, k[s:e], ar, f"{what}: k rotated in the packed row against the document alone")
        alone = vh.call_varlen(target, one, qa, ka, v[s:e])
        allowed = 2 * tolerance.allowance(vh.truth(one, qa, ka, v[s:e]), vh.naive(one, qa, ka, v[s:e]),
                                          dtype=q.dtype)
        diff = (out[s:e].double().cpu() - alone.double().cpu()).abs().nan_to_num(float("inf"))
        if diff.numel() and float(diff.max()) > allowed:
            raise AssertionError(f"{what}: the packed output differs from the document run alone by "
                                 f"{float(diff.max()):.3e} (allowed {allowed:.3e})")


_SOFTCAP = st.sampled_from([0.5, 1.0, 2.0, 5.0, 30.0])


def _with(strategy, **fields):
    return st.builds(lambda cfg, extra: replace(cfg, **extra), strategy, st.fixed_dictionaries(fields))


@EXAMPLES
@given(cfg=ac.varlen_configs())
@covering(regimes.VARLEN)
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@EXAMPLES
@given(cfg=ac.varlen_configs(lengths=ac.equal_lengths((2, 5), 40)))
@covering(regimes.VARLEN_TILES[:4])
def test_isolation(target, cfg):
    run(target, check_isolation, cfg)


@pytest.mark.uses("is_causal")
@EXAMPLES
@given(cfg=ac.varlen_configs(causal=st.just(True), distinct=True))
@covering(regimes.VARLEN_CAUSAL)
def test_causal(target, cfg):
    run(target, check_causal, cfg)


@EXAMPLES
@given(cfg=ac.varlen_configs(lengths=ac.zero_lengths()))
@covering(regimes.VARLEN_ZERO)
def test_zero_length(target, cfg):
    run(target, check_zero_length, cfg)


@EXAMPLES
@given(cfg=ac.varlen_configs(lengths=ac.tile_offsets()))
@covering(regimes.VARLEN_TILES)
def test_tile_offsets(target, cfg):
    run(target, check_tile_offsets, cfg)


@EXAMPLES
@given(cfg=ac.varlen_configs(gqa=True))
@covering(regimes.VARLEN_GQA)
def test_gqa(target, cfg):
    run(target, check_gqa, cfg)


@pytest.mark.uses("varlen_window")
@EXAMPLES
@given(cfg=_with(ac.varlen_configs(causal=st.sampled_from([True, True, False])), window=st.integers(1, 42)))
@covering(regimes.VARLEN_WINDOW)
def test_window(target, cfg):
    run(target, check_window, cfg)


@pytest.mark.uses("softcap")
@EXAMPLES
@given(cfg=_with(ac.varlen_configs(), softcap=_SOFTCAP))
@covering(tuple(replace(c, softcap=1.0) for c in regimes.VARLEN_TILES[1:3]))
def test_softcap(target, cfg):
    run(target, check_softcap, cfg)


@pytest.mark.uses("sinks")
@EXAMPLES
@given(cfg=_with(ac.varlen_configs() | ac.varlen_configs(gqa=True), sinks=st.just(True)))
@covering(tuple(replace(c, sinks=True) for c in regimes.VARLEN_TILES[2:4] + regimes.VARLEN_GQA[:1]))
def test_sinks(target, cfg):
    run(target, check_sinks, cfg)


@pytest.mark.needs("apply_rotary_embedding")
@pytest.mark.uses("is_causal")
@EXAMPLES
@given(cfg=ac.varlen_configs(causal=st.just(True), even_head=True, max_batch=3))
@covering(regimes.VARLEN_ROPE)
def test_rope_packed(target, cfg):
    run(target, check_rope_packed, cfg)
