"""``attention_with_kvcache`` with its options drawn together (issue 43, ``suites.pairwise``).

The other KV-cache properties each draw one option against the defaults (a rolling window, RoPE
tables, a paged pool, softcap, sinks), so a kernel whose paged path forgets the rotary offset, or
whose rolling window reads the wrong KV head under GQA, passes all of them. Here every pair of
option values (``OPTIONS``: batch items, cached lengths below and past a tile, prefill or decode,
GQA, window, rotary tables and pairing, linear or paged caches, softcap, sinks, causal, dtype,
Ev != E) meets in at least one configuration of the covering set, run first on every profile;
then random combinations. The check is the cheap one: the outputs of every call equal the float64
cache reference fed the same calls (``reference/kvcache.py``), with the declared window extent.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from harness.reference.kvcache import scatter
from harness.suites import pairwise
from harness.suites.kit import run, under_convention
from harness.suites.kvcache import helpers as kv
from harness.suites.kvcache.configs import KVCacheConfig
from harness.suites.regimes import covering

PROPERTY_PREFIX = "options_together"
pytestmark = pytest.mark.needs(kv.KV)

#: cached lengths per (items, length): one item or three ragged ones, below or past the 64/128 tiles
_PRIOR = {("one", "short"): (6,), ("one", "tile"): (129,),
          ("ragged", "short"): (0, 9, 4), ("ragged", "tile"): (63, 130, 1)}
_CHUNKS = {"decode": (1, 1), "prefill": (7, 1)}
_HEADS = {"mha": (2, 2), "gqa": (4, 2), "mqa": (3, 1)}
_PAGES = {"linear": 0, "pages16": 16, "pages3": 3}

OPTIONS = pairwise.Options(
    protocol_name=kv.KV,
    factors=(
        pairwise.Factor("items", ("one", "ragged"), ("cache_seqlens",), "1 item, or 3 with different cached lengths"),
        pairwise.Factor("length", ("short", "tile"), ("cache_seqlens",), "cached lengths below 10, or at 63 .. 130"),
        pairwise.Factor("call", ("decode", "prefill"), ("q", "k", "v"), "calls of 1 token, or 7 then 1"),
        pairwise.Factor("heads", tuple(_HEADS), ("enable_gqa",), "Hq:Hkv 2:2, 4:2, 3:1"),
        pairwise.Factor("window", (0, 5), ("window", "kvcache_window"), "none, or 5 (a rolling cache when linear)"),
        pairwise.Factor("rotary", ("none", "half", "interleaved"),
                        ("rotary_cos", "rotary_sin", "rotary_interleaved", "kvcache_rotary"),
                        "no tables; rotate-half on the first half of E; interleaved pairs on all of E"),
        pairwise.Factor("cache", tuple(_PAGES), ("block_table", "kvcache_paged", "k_cache", "v_cache"),
                        "linear; pages of 16 or of 3 in a shuffled pool with a spare page"),
        pairwise.Factor("softcap", (0.0, 2.0), ("softcap",)),
        pairwise.Factor("sinks", (False, True), ("sinks",)),
        pairwise.Factor("causal", (True, False), ("causal",)),
        pairwise.Factor("dtype", ("float32", "bfloat16", "float16"), ("dtypes",)),
        pairwise.Factor("Ev", ("E", "other"), ("v_cache",), "Ev = E = 32, or Ev = 24"),
    ),
    build=lambda row: _config(row),
    forbidden=(((("window", 5), ("causal", False)),
                "the protocol defines a window for causal calls only (the last w keys up to the query)"),),
    not_drawn={"scale": "attention.scale and the SDPA covering set (the default 1/sqrt(E) here)",
               "chunk": "kvcache_chunked.* (chunked local attention, its own properties; not yet paired with the "
                        "other options here)",
               "kvcache_chunked": "as chunk"},
)


def _config(row: dict) -> KVCacheConfig:
    hq, hkv = _HEADS[row["heads"]]
    prior = _PRIOR[(row["items"], row["length"])]
    E = 32
    rotary = {"none": 0, "half": E // 2, "interleaved": E}[row["rotary"]]
    seed = pairwise.row_seed(row, 400)
    return KVCacheConfig(batch=len(prior), hq=hq, hkv=hkv, E=E, Ev=E if row["Ev"] == "E" else 24, dtype=row["dtype"],
                         seed=seed, chunks=_CHUNKS[row["call"]], lengths=prior, slack=1, window=row["window"],
                         rotary_dim=rotary, interleaved=row["rotary"] == "interleaved", causal=row["causal"],
                         block_size=_PAGES[row["cache"]], spare=1 if row["cache"] != "linear" else 0,
                         softcap=row["softcap"], sinks=row["sinks"])


COVERING = tuple(OPTIONS.build(r) for r in pairwise.covering_rows(OPTIONS))
#: the fields that turn each feature off (``pairwise.project``: a target that declares one unsupported)
DROPS = {"kvcache_paged": {"block_size": 0, "spare": 0}, "kvcache_rotary": {"rotary_dim": 0, "interleaved": False},
         "kvcache_window": {"window": 0}, "softcap": {"softcap": 0.0}, "sinks": {"sinks": False},
         "enable_gqa": {"hq": lambda c: c.hkv}}


def start_caches(cfg: KVCacheConfig, k, v, device, *, rotary=None, table=None):
    """The caches as the harness fills them before the first call: item b's first ``prior[b]``
    keys (rotated at their positions in float64 with ``rotary``, then cast, as a kernel stores them)
    and values, at their slots (a rolling cache holds the last Smax positions; a paged pool is
    written through ``table``), random values elsewhere."""
    if rotary is not None:
        k = kv.rotated(cfg, k, rotary).to(cfg.torch_dtype).to(device)
    if table is not None:
        return kv.pool(cfg, k, v, table, device)
    kc, vc = cfg.garbage_cache(device)
    for b, c in enumerate(cfg.prior):
        pos = torch.arange(max(0, c - cfg.slots), c, device=device)
        scatter(kc, b, pos, k[b, :, pos])
        scatter(vc, b, pos, v[b, :, pos])
    return kc, vc


def describe(cfg: KVCacheConfig) -> str:
    parts = [f"cache_seqlens {list(cfg.prior)}, calls {cfg.chunks}", f"Hq:Hkv {cfg.hq}:{cfg.hkv}",
             "causal" if cfg.causal else "not causal"]
    if cfg.window:
        parts.append(f"window {cfg.window} over " + ("pages" if cfg.block_size else f"a rolling cache of {cfg.slots}"))
    if cfg.rotary_dim:
        parts.append(f"rotary_dim {cfg.rotary_dim} ({'interleaved' if cfg.interleaved else 'rotate-half'})")
    if cfg.block_size:
        parts.append(f"pages of {cfg.block_size}")
    if cfg.softcap:
        parts.append(f"softcap {cfg.softcap:g}")
    if cfg.sinks:
        parts.append("sinks")
    return ", ".join(parts)


def check_kvcache(target, cfg):
    """Every pair of ``attention_with_kvcache``'s option values meets in the covering set (docs/suites.md):
    with whatever options the configuration holds together, the outputs of each call equal the float64
    cache reference fed the same calls (a window with the declared ``window_extent``; the other
    extent, where it alone agrees, is named as the convention). Options the target declares
    unsupported are left out of the configuration (``pairwise.project``), the others kept together."""
    cfg = pairwise.project(target, cfg, DROPS)
    dev = target.device
    q, k, v = cfg.qkv(dev)
    sinks = cfg.sink_logits(dev)
    rotary = cfg.rotary_tables(dev) if cfg.rotary_dim else None
    table = cfg.block_table(dev) if cfg.block_size else None
    kc, vc = start_caches(cfg, k, v, dev, rotary=rotary, table=table)
    lin_k, lin_v = (kv.logical(kc, table, cfg), kv.logical(vc, table, cfg)) if table is not None else (kc, vc)
    lin_k, lin_v = lin_k.clone(), lin_v.clone()
    out = kv.feed_prior(target, cfg, q, k, v, kc, vc, table=table, sinks=sinks, rotary=rotary)
    what = describe(cfg)

    def against(extent):
        ref, nai, _, _ = kv.truth_prior(cfg, q, k, v, lin_k, lin_v, sinks=sinks, rotary=rotary, extent=extent)
        kv.assert_close(out, ref, nai, q.dtype, f"{what}: the outputs of the calls against the float64 reference")

    if not cfg.window:
        return against("w")
    under_convention(target, "window_extent", against, what)


#: a third of the profile's random combinations, at least 5: the covering set runs first on every profile
EXAMPLES = settings(max_examples=max(5, settings.default.max_examples // 3))


@EXAMPLES
@given(cfg=pairwise.row_strategy(OPTIONS).map(OPTIONS.build))
@covering(COVERING)
def test_kvcache(target, cfg):
    run(target, check_kvcache, cfg)
