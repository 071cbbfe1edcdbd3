"""The KV-cache names in the suites that run across names: ``attention_with_kvcache``'s history
(``history.attention_with_kvcache``, judged by ``kvcache.decode``) and its differential check (the
session's targets held to each other: a ragged linear call, and the same logical contents in a paged
pool compared with the linear call's output; ``suites/consistency/differential.py``).

    q (B, Hq, Lnew, E), caches (B, Hkv, S, E) or a pool (blocks, block_size, Hkv, E) with a block table
"""
from __future__ import annotations

from dataclasses import replace

from harness.suites.consistency.differential import Case, as_float64, call_function, policy
from harness.suites.histories import History
from harness.suites.kit import Unsupported, require_features
from harness.suites.kvcache import configs as kvc
from harness.suites.kvcache import helpers as kv
from harness.suites.kvcache import test_kvcache as kvcache

HISTORIES = (History(name="attention_with_kvcache", configs=kvc.decode_configs(), judge=kvcache.check_decode),)

_LINEAR, _PAGED = "ragged cache_seqlens", "paged (block_table), against the linear call"


def _kv_calls(cfg, device):
    """The linear call, and the same logical contents in a paged pool (``cfg.block_size``)."""
    q, k, v = cfg.qkv(device)
    qn, kn, vn = kv.new_tokens(cfg, q), kv.new_tokens(cfg, k), kv.new_tokens(cfg, v)
    kc, vc = kv.prefilled(cfg, k, v, device)
    table = cfg.block_table(device)
    pk, pv = kv.pool(cfg, k, v, table, device)
    lens = kv.seqlens(cfg.prior, device)
    return [(_LINEAR, (qn, kc, vc, kn, vn), {"cache_seqlens": lens, **kv.options(cfg)}),
            (_PAGED, (qn, pk, pv, kn, vn), {"cache_seqlens": lens, **kv.options(cfg, table=table)})]


def _kv_judge(cfg, label, args, kwargs, out_dtype):
    (truth, _, _), naive = kv.one_call_truth(cfg, *args, table=kwargs.get("block_table"))
    return as_float64, policy(truth, naive, args[0].dtype)


def _kv_invoke(target, name, cfg, args, kwargs):
    """A paged call only on the targets that take a block table (``kvcache_paged``)."""
    if "block_table" in kwargs:
        try:
            require_features(target, "kvcache_paged")
        except Unsupported:
            return None
    return call_function(target, name, cfg, args, kwargs)


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "attention_with_kvcache": Case(kvc.ragged_configs().flatmap(
        lambda c: kvc.BLOCK_SIZES.map(lambda bs: replace(c, block_size=bs))), _kv_calls, _kv_judge,
        invoke=_kv_invoke, against={_PAGED: _LINEAR}),
}

