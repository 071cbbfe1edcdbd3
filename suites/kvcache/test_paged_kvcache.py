"""Paged KV caches and the kernel options softcap and sinks: ``attention_with_kvcache`` with a
``block_table``, ``softcap`` and ``sinks`` (issue 24).

Protocol (harness/spec/protocol.py, reference/kvcache.py): with ``block_table`` (B, max_blocks) the caches
are a pool ``(num_blocks, Hkv, block_size, E|Ev)`` and position p of item b lives in block
``block_table[b, p // block_size]`` at slot ``p % block_size``. The pool is laid out by a
permutation drawn from the seed, pages are partly filled (block sizes 1, 16, 256 and small ones),
items may share the pages of a common prefix. The properties hold a paged call to what a linear
cache with the same logical contents gives (the float64 reference, call by call), check where
every write lands in the pool (exactly: a copy), that the physical layout is invisible, and that a
shared prefix is read by both items and written by neither; softcap and sinks are checked on
linear and paged caches against the float64 reference (``reference/attention_options.py``). The
caches the target writes come back to the harness (``guard.MUTABLE``). A target that declares
``kvcache_paged``, ``softcap`` or ``sinks`` unsupported, or whose function lacks the parameter,
gets those properties (or configurations) reported unsupported.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.suites.regimes import covering
from harness.suites.kit import run
from harness.suites.kvcache import configs as kvc
from harness.suites.kvcache import helpers as kv

PROPERTY_PREFIX = "kvcache"
pytestmark = pytest.mark.needs(kv.KV)

#: half the loaded profile's examples, at least 10 (each example is several calls over a pool;
#: harness-ci and harness-dev run 15, harness-thorough 150): the CI budget
_EXAMPLES = settings(max_examples=max(10, settings.default.max_examples // 2))


def _setup(target, cfg, poison: bool = False, contiguous: bool = False):
    dev = target.device
    q, k, v = cfg.qkv(dev)
    table = cfg.block_table(dev, contiguous=contiguous)
    kc, vc = kv.pool(cfg, k, v, table, dev, poison_q=q if poison else None)
    return q, k, v, table, kc, vc


def _owner(cfg, table, block: int, slot: int) -> str:
    """Which items' logical positions the physical (block, slot) holds."""
    names = [f"item {b}'s position {j * cfg.block_size + slot}" for b in range(cfg.batch)
             for j in range(cfg.max_blocks) if int(table[b, j]) == block]
    return " and ".join(names) if names else "no item's position (a spare page)"


def _assert_pool(cfg, table, got, want, before, name: str, what: str) -> None:
    """The whole pool ``got`` equals ``want`` (a copy is exact); the first difference named by
    its physical place and the logical position(s) it holds."""
    if torch.equal(got.cpu(), want):
        return
    blk, h, slot, _ = kv.first_difference(got.cpu(), want)
    where = f"{name}[block {blk}, head {h}, slot {slot}] ({_owner(cfg, table, blk, slot)})"
    if torch.equal(want[blk, :, slot], before[blk, :, slot].cpu()):
        raise AssertionError(f"{what}: {where} was written, but the calls write no position it holds "
                             f"(a new key lands in block_table[b, p // block_size], slot p % block_size)")
    raise AssertionError(f"{what}: {where} does not hold the key/value fed at that position: the new "
                         f"keys/values must land in their physical slot, block_table[b, p // block_size], "
                         f"slot p % block_size")


def _against_linear(target, cfg, poison: bool):
    """Feed the calls through the target's paged cache and the float64 reference over a linear
    cache with the same logical contents; compare outputs, then the logical contents after."""
    q, k, v, table, kc, vc = _setup(target, cfg, poison=poison)
    sinks = cfg.sink_logits(target.device)
    ref, nai, ref_k, ref_v = kv.truth_prior(cfg, q, k, v, kv.logical(kc, table, cfg), kv.logical(vc, table, cfg),
                                            sinks=sinks)
    out = kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table, sinks=sinks)
    return q, out, ref, nai, (kc, vc, ref_k, ref_v, table)


def _assert_logical(cfg, after, what: str) -> None:
    kc, vc, ref_k, ref_v, table = after
    for name, cache, ref in (("k_cache", kc, ref_k), ("v_cache", vc, ref_v)):
        got = kv.logical(cache, table, cfg).cpu()
        if not torch.equal(got, ref):
            b, h, p, _ = kv.first_difference(got, ref)
            blk = int(table[b, p // cfg.block_size])
            raise AssertionError(f"{what}: item {b}'s logical position {p} ({name}[block {blk}, head {h}, slot "
                                 f"{p % cfg.block_size}]) differs from the linear cache's after the same calls")


def check_paged_agreement(target, cfg):
    """A paged cache agrees with the linear cache of the same logical contents: the outputs of
    the calls equal the float64 reference over the linear cache, and afterwards every item's
    logical cache (read through its table row) equals the linear one's."""
    q, out, ref, nai, after = _against_linear(target, cfg, poison=False)
    what = kv.describe_paged(cfg)
    kv.assert_close(out, ref, nai, q.dtype, f"{what}: the outputs (the truth: a linear cache with the same logical "
                                       f"contents)")
    _assert_logical(cfg, after, what)


def check_paged_unfilled_slots(target, cfg):
    """Every slot of the pool that holds no cached position (the unfilled part of each item's last
    page, the pages not reached yet, the spare pages) holds +-1e4: no influence on the outputs,
    causal or not."""
    q, out, ref, nai, after = _against_linear(target, cfg, poison=True)
    try:
        kv.assert_close(out, ref, nai, q.dtype, "output")
    except AssertionError as exc:
        raise AssertionError(f"{kv.describe_paged(cfg)}: the slots past each item's filled positions (its last "
                             f"page partly filled) and the pages no item has reached hold +-1e4, and they changed "
                             f"the output (causal={cfg.causal}): {exc}") from None
    _assert_logical(cfg, after, kv.describe_paged(cfg))


def check_paged_writes(target, cfg):
    """The new keys/values land in their physical slots: after the calls the whole pool equals
    the reference's (position p of item b at block block_table[b, p // block_size], slot
    p % block_size), and no other slot changed (partly filled pages, spare pages)."""
    q, k, v, table, kc, vc = _setup(target, cfg)
    before_k, before_v = kc.clone(), vc.clone()
    _, _, want_k, want_v = kv.truth_prior(cfg, q, k, v, kc, vc, table=table)
    kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table)
    what = f"after the calls ({kv.describe_paged(cfg)})"
    _assert_pool(cfg, table, kc, want_k, before_k, "k_cache", what)
    _assert_pool(cfg, table, vc, want_v, before_v, "v_cache", what)


def check_paged_layout_invisible(target, cfg):
    """The physical layout is invisible: the same logical contents in the pool laid out in order
    (item after item) and with its pages permuted (the table permuted to match) give the same
    outputs (within twice the tolerance policy's allowance) and the same writes, page for page."""
    q, k, v, table, kc, vc = _setup(target, cfg, contiguous=True)
    perm = torch.randperm(cfg.num_blocks, generator=cfg.generator(salt=11)).to(table.device)
    table_p = perm[table.long()].to(torch.int32)
    kc_p, vc_p = torch.empty_like(kc), torch.empty_like(vc)
    kc_p[perm], vc_p[perm] = kc, vc
    ref, nai, _, _ = kv.truth_prior(cfg, q, k, v, kv.logical(kc, table, cfg), kv.logical(vc, table, cfg))
    out = kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table)
    out_p = kv.feed_prior(target, cfg, q, k, v, kc_p, vc_p, table=table_p)
    what = f"{kv.describe_paged(cfg)}, pages in order and permuted"
    allowed = 2 * tolerance.allowance(ref, nai, dtype=q.dtype)
    diff = (out.cpu().double() - out_p.cpu().double()).abs().nan_to_num(float("inf"))
    if float(diff.max()) > allowed:
        idx = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
        raise AssertionError(f"{what}: the outputs differ at {idx} by {float(diff.max()):.3e} (allowed {allowed:.3e}): "
                             f"{float(out[idx]):.6g} with the pages in order, {float(out_p[idx]):.6g} permuted")
    for name, a, b in (("k_cache", kc, kc_p), ("v_cache", vc, vc_p)):
        if not torch.equal(a.cpu(), b[perm].cpu()):
            blk, h, slot, _ = kv.first_difference(a.cpu(), b[perm].cpu())
            raise AssertionError(f"{what}: {name}[block {blk}, head {h}, slot {slot}] in order and its page "
                                 f"{int(perm[blk])} permuted hold different values after the same calls")


def check_paged_shared_prefix(target, cfg):
    """Items 0 and 1 share their first pages (a common prefix, both cached past it): neither call
    writes them, and both items read them (outputs against the float64 reference)."""
    q, k, v, table, kc, vc = _setup(target, cfg)
    shared = table[0, :cfg.shared].long()
    before_k, before_v = kc[shared].clone(), vc[shared].clone()
    ref, nai, _, _ = kv.truth_prior(cfg, q, k, v, kv.logical(kc, table, cfg), kv.logical(vc, table, cfg))
    out = kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table)
    what = f"{kv.describe_paged(cfg)}, items 0 and 1 sharing their first {cfg.shared} page(s) (blocks " \
           f"{shared.tolist()})"
    for name, cache, before in (("k_cache", kc, before_k), ("v_cache", vc, before_v)):
        if not torch.equal(cache[shared], before):
            j, h, slot, _ = kv.first_difference(cache[shared].cpu(), before.cpu())
            raise AssertionError(f"{what}: {name}[block {int(shared[j])}, head {h}, slot {slot}] (the shared prefix's "
                                 f"position {j * cfg.block_size + slot}) was written; both items are cached past it, "
                                 f"so no call may write it")
    for b in range(cfg.batch):
        kv.assert_close(out[b:b + 1], ref[b:b + 1], nai[b:b + 1], q.dtype, f"{what}: item {b}'s outputs")


def _options_check(target, cfg, option: str):
    q, k, v = cfg.qkv(target.device)
    sinks = cfg.sink_logits(target.device)
    if cfg.block_size:
        table = cfg.block_table(target.device)
        kc, vc = kv.pool(cfg, k, v, table, target.device)
        lin_k, lin_v = kv.logical(kc, table, cfg), kv.logical(vc, table, cfg)
    else:
        table = None
        kc, vc = kv.prefilled(cfg, k, v, target.device)
        lin_k, lin_v = kc, vc
    ref, nai, _, _ = kv.truth_prior(cfg, q, k, v, lin_k, lin_v, sinks=sinks)
    out = kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table, sinks=sinks)
    cache = kv.describe_paged(cfg) if cfg.block_size else f"linear cache, cache_seqlens {list(cfg.prior)}, " \
                                                          f"calls {cfg.chunks}"
    kv.assert_close(out, ref, nai, q.dtype, f"{option}, {cache}, causal={cfg.causal}: the outputs")


def check_softcap(target, cfg):
    """With ``softcap`` the scaled scores are soft-capped (softcap * tanh(s / softcap)) before the
    mask: the outputs equal the float64 reference, on linear and paged caches."""
    _options_check(target, cfg, f"softcap {cfg.softcap:g}")


def check_sinks(target, cfg):
    """With ``sinks`` (one logit per query head) the softmax's denominator holds exp(sink) as one
    more term (no value): the outputs equal the float64 reference, on linear and paged caches."""
    _options_check(target, cfg, "sinks")


@pytest.mark.uses("kvcache_paged")
@_EXAMPLES
@given(cfg=kvc.paged_configs())
@covering(kvc.PAGED)
def test_paged_agreement(target, cfg):
    run(target, check_paged_agreement, cfg)


@pytest.mark.uses("kvcache_paged")
@_EXAMPLES
@given(cfg=kvc.paged_configs(causal=st.booleans()))
@covering(kvc.PAGED_UNFILLED)
def test_paged_unfilled_slots(target, cfg):
    run(target, check_paged_unfilled_slots, cfg)


@pytest.mark.uses("kvcache_paged")
@_EXAMPLES
@given(cfg=kvc.paged_configs())
@covering(kvc.PAGED + kvc.SHARED)
def test_paged_writes(target, cfg):
    run(target, check_paged_writes, cfg)


@pytest.mark.uses("kvcache_paged")
@_EXAMPLES
@given(cfg=kvc.paged_configs())
@covering(kvc.PAGED)
def test_paged_layout_invisible(target, cfg):
    run(target, check_paged_layout_invisible, cfg)


@pytest.mark.uses("kvcache_paged")
@_EXAMPLES
@given(cfg=kvc.paged_configs(shared=True))
@covering(kvc.SHARED)
def test_paged_shared_prefix(target, cfg):
    run(target, check_paged_shared_prefix, cfg)


@pytest.mark.uses("softcap")
@_EXAMPLES
@given(cfg=kvc.paged_configs(causal=st.booleans(), paged=st.booleans(), softcap=True))
@covering(kvc.SOFTCAP)
def test_softcap(target, cfg):
    run(target, check_softcap, cfg)


@pytest.mark.uses("sinks")
@_EXAMPLES
@given(cfg=kvc.paged_configs(causal=st.booleans(), paged=st.booleans(), sinks=True))
@covering(kvc.SINKS)
def test_sinks(target, cfg):
    run(target, check_sinks, cfg)
