"""Attention over a KV cache (incremental decoding): ``attention_with_kvcache``.

Protocol (harness/spec/protocol.py, reference/kvcache.py): q (B, Hq, Lq, E), caches (B, Hkv, Smax, E|Ev),
new k/v (B, Hkv, Lnew, E|Ev) written in place at slots cache_seqlens[b] ...; query i of item b
sits at position cache_seqlens[b] + Lnew - Lq + i and (causal) sees the keys up to it. The
properties hold decoding to what it must equal: one full causal call of the float64 SDPA
reference (whatever the split into prefill, chunks and decode steps), the float64 cache
reference per batch item (lengths that differ), nothing read past the filled part (+-1e4 there),
full sliding-window attention for a rolling cache, and RoPE at each token's absolute position.
The caches the target writes come back to the harness (``guard.MUTABLE``) and are checked too.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.suites.kvcache import configs as kvc
from harness.suites.kit import run, under_convention
from harness.suites.regimes import covering
from harness.reference.attention import attention_math
from harness.reference.sliding_window import sliding_window_math
from harness.suites.kvcache import helpers as kv
from harness.suites.attention.helpers import naive, truth

PROPERTY_PREFIX = "kvcache"
pytestmark = pytest.mark.needs(kv.KV)


def _fed_in_order(target, cfg):
    """Feed the whole sequence in ``cfg.chunks`` and check it against one full causal call."""
    q, k, v = cfg.qkv(target.device)
    kc, vc = cfg.garbage_cache(target.device)
    before_k, before_v = kc.clone(), vc.clone()
    out = kv.feed(target, cfg, q, k, v, kc, vc)
    T = cfg.total
    kv.assert_cache_holds(kc, vc, k, v, torch.arange(T), torch.arange(T), f"after the calls {cfg.chunks}")
    if not (torch.equal(kc[:, :, T:], before_k[:, :, T:]) and torch.equal(vc[:, :, T:], before_v[:, :, T:])):
        raise AssertionError(f"after the calls {cfg.chunks} the cache changed past the {T} positions fed")
    kv.assert_close(out, truth(q, k, v, is_causal=True), naive(q, k, v, is_causal=True), q.dtype,
               f"the outputs of the calls {cfg.chunks}, concatenated, against one causal call over all {T} positions")


def check_decode(target, cfg):
    """A prefill of P tokens (any P, none included) and then single-token decode steps give, concatenated, the
    outputs of one full causal call of the float64 SDPA reference over the whole sequence, and leave every
    key/value in its slot (a copy is exact) and no slot past the fed positions written."""
    _fed_in_order(target, cfg)


def check_chunked_prefill(target, cfg):
    """The sequence fed in chunks of any sizes (1 .. 12 tokens, up to 5 calls; chunks across the 64/128/256
    tiles in the regime) gives the outputs of one full causal call."""
    _fed_in_order(target, cfg)


def _one_call(target, cfg, poison: bool):
    q, k, v = cfg.qkv(target.device)
    qn, kn, vn = kv.new_tokens(cfg, q), kv.new_tokens(cfg, k), kv.new_tokens(cfg, v)
    ends = [c + cfg.chunks[0] for c in cfg.prior]
    kc, vc = kv.prefilled(cfg, k, v, target.device, poison_from=cfg.prior if poison else None, q=qn)
    (ref, ref_k, ref_v), nai = kv.one_call_truth(cfg, qn, kc, vc, kn, vn)
    before_k, before_v = kc.clone(), vc.clone()
    out = kv.call_kv(target, cfg, qn, kc, vc, kn, vn, kv.seqlens(cfg.prior, q.device), **kv.options(cfg))

    def check_caches():
        for b, (c, n) in enumerate(zip(cfg.prior, ends)):
            slots = torch.arange(c, n)
            kv.assert_cache_holds(kc[b:b + 1], vc[b:b + 1], k[b:b + 1], v[b:b + 1], slots, slots,
                                  f"batch item {b} (cache_seqlens {c})", item=b)
            if not (torch.equal(kc[b, :, n:], before_k[b, :, n:]) and torch.equal(vc[b, :, n:], before_v[b, :, n:])):
                raise AssertionError(f"batch item {b}: cache_seqlens is {c} and {cfg.chunks[0]} token(s) were fed, "
                                     f"but the cache changed at slots past {n}")
    return out, ref, nai, q.dtype, check_caches


def check_ragged_lengths(target, cfg):
    """2 .. 4 batch items with cached lengths that differ (0 .. 24; a tile apart in the regime): each item's
    new keys land at its own cache_seqlens[b], and its queries see exactly its own filled part (float64
    cache reference)."""
    out, ref, nai, dtype, check_caches = _one_call(target, cfg, poison=False)
    check_caches()
    kv.assert_close(out, ref, nai, dtype, f"cache_seqlens {list(cfg.prior)}, {cfg.chunks[0]} new token(s)")


def check_unfilled_slots(target, cfg):
    """Every slot from cache_seqlens[b] on holds +-1e4 (keys shrunk so raw scores stay below a quarter of the
    dtype's max), including the slots the call is to overwrite: they have no influence on the output
    (causal or not), and nothing is written past cache_seqlens[b] + Lnew."""
    out, ref, nai, dtype, check_caches = _one_call(target, cfg, poison=True)
    try:
        kv.assert_close(out, ref, nai, dtype, "output")
    except AssertionError as exc:
        raise AssertionError(f"slots past cache_seqlens {list(cfg.prior)} (+ {cfg.chunks[0]} new) hold +-1e4, "
                             f"and they changed the output (causal={cfg.causal}): {exc}") from None
    check_caches()


def _window_out(target, cfg):
    q, k, v = cfg.qkv(target.device)
    kc, vc = cfg.garbage_cache(target.device)
    return q, k, v, kc, vc, kv.feed(target, cfg, q, k, v, kc, vc)


def check_rolling_window(target, cfg):
    """A window w (1 .. 12; 63, 64, 128, 256 in the regime) over a rolling cache of w + 0 .. 3 slots that
    wraps (position p in slot p mod Smax): the decoded outputs equal full sliding-window attention over the
    whole sequence with the declared ``window_extent`` (a kernel that keeps w + 1 keys is named,
    ``convention:w+1`` when declared), and the cache holds the last Smax positions."""
    q, k, v, kc, vc, out = _window_out(target, cfg)
    T, S = cfg.total, cfg.slots
    what = f"window {cfg.window}, a rolling cache of {S} slots, calls {cfg.chunks}"

    g = cfg.hq // cfg.hkv  # (the sliding-window reference takes one KV head per query head)
    ke, ve = k.cpu().repeat_interleave(g, dim=-3), v.cpu().repeat_interleave(g, dim=-3)

    def against(extent):
        ref = sliding_window_math(q.cpu(), ke, ve, cfg.window, extent=extent)
        nai = sliding_window_math(q.cpu(), ke, ve, cfg.window, extent=extent, compute_dtype=q.dtype)
        kv.assert_close(out, ref, nai, q.dtype, f"{what}: against full sliding-window attention ({extent})")
    under_convention(target, "window_extent", against, what)
    pos = torch.arange(max(0, T - S), T)
    kv.assert_cache_holds(kc, vc, k, v, pos % S, pos, what)


def check_rotary(target, cfg):
    """With RoPE tables (in the input dtype, partial rotary R <= E, both pairings) the queries and new keys
    are rotated at their absolute positions (cache_seqlens + i, not i): decoded outputs equal one causal
    call on RoPE'd q and k, and the cache holds the rotated keys; ``unsupported (declared: ...)`` for a
    target declaring ``kvcache_rotary``."""
    q, k, v = cfg.qkv(target.device)
    kc, vc = cfg.garbage_cache(target.device)
    tables = cfg.rotary_tables(target.device)
    out = kv.feed(target, cfg, q, k, v, kc, vc, rotary=tables)
    T, dt = cfg.total, q.dtype
    what = f"rotary_dim {cfg.rotary_dim} ({'interleaved' if cfg.interleaved else 'rotate-half'}), calls {cfg.chunks}"
    k64, kdt = kv.rotated(cfg, k, tables), kv.rotated(cfg, k, tables, dt)
    kv.assert_close(kc[:, :, :T], k64, kdt, dt, f"{what}: cached keys against the keys rotated at their positions")
    q64, qdt = kv.rotated(cfg, q, tables), kv.rotated(cfg, q, tables, dt)
    ref = attention_math(q64, k64, v.cpu(), is_causal=True, enable_gqa=cfg.hq != cfg.hkv)
    kv.assert_close(out, ref, naive(qdt, kdt, v, is_causal=True), dt,
               f"{what}: against one causal call on q and k rotated at their positions")


@given(cfg=kvc.decode_configs())
@covering(kvc.DECODE)
def test_decode(target, cfg):
    run(target, check_decode, cfg)


@given(cfg=kvc.chunk_configs())
@covering(kvc.CHUNKS)
def test_chunked_prefill(target, cfg):
    run(target, check_chunked_prefill, cfg)


@given(cfg=kvc.ragged_configs())
@covering(kvc.RAGGED)
def test_ragged_lengths(target, cfg):
    run(target, check_ragged_lengths, cfg)


@given(cfg=kvc.ragged_configs(causal=st.booleans(), min_slack=1))
@covering(kvc.POISON)
def test_unfilled_slots(target, cfg):
    run(target, check_unfilled_slots, cfg)


@pytest.mark.uses("kvcache_window")
@given(cfg=kvc.window_configs())
@covering(kvc.WINDOW)
def test_rolling_window(target, cfg):
    run(target, check_rolling_window, cfg)


@pytest.mark.uses("kvcache_rotary")
@given(cfg=kvc.rotary_configs())
@covering(kvc.ROTARY)
def test_rotary(target, cfg):
    run(target, check_rotary, cfg)

