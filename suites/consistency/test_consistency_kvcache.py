"""Consistency of the KV-cache names: the session's targets held to each other on the same inputs
(``attention_with_kvcache``: a ragged linear call, and the same logical contents in a paged pool
compared with the linear call's output). How the targets are called and compared:
``suites/consistency/differential.py``.

    q (B, Hq, Lnew, E), caches (B, Hkv, S, E) or a pool (blocks, block_size, Hkv, E) with a block table
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.suites.consistency.differential import Case, as_float64, call_function, not_compared, outputs_agree, policy
from harness.suites.kit import Unsupported, require_features
from harness.suites.kvcache import configs as kvc
from harness.suites.kvcache import helpers as kv

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "kvcache"

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


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "attention_with_kvcache": Case(kvc.ragged_configs().flatmap(
        lambda c: kvc.BLOCK_SIZES.map(lambda bs: replace(c, block_size=bs))), _kv_calls, _kv_judge,
        invoke=_kv_invoke, against={_PAGED: _LINEAR}),
}
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)
