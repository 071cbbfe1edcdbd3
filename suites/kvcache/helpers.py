"""Helpers of the KV-cache suite: calling ``attention_with_kvcache``, feeding a sequence through
it chunk by chunk, caches the harness fills itself, and the float64 truth."""
from __future__ import annotations

import torch

from harness.spec import tolerance
from harness.suites.kvcache.configs import KVCacheConfig
from harness.suites.kit import expect_tensor, impl, require_features
from harness.reference.kvcache import gather, kvcache_math, rotate, scatter
from harness.suites.attention.helpers import EXTREME, extreme_like

KV = "attention_with_kvcache"


def features_of(cfg: KVCacheConfig) -> list[str]:
    """The ``HARNESS_UNSUPPORTED`` features the calls of ``cfg`` use."""
    used = [f for f, on in (("enable_gqa", cfg.hq != cfg.hkv), ("kvcache_window", cfg.window > 0),
                            ("kvcache_rotary", cfg.rotary_dim > 0), ("kvcache_paged", cfg.block_size > 0),
                            ("softcap", cfg.softcap > 0), ("sinks", cfg.sinks),
                            ("kvcache_chunked", cfg.chunk > 0)) if on]
    return used + [cfg.dtype]


def options(cfg: KVCacheConfig, rotary=None, table=None, sinks=None) -> dict:
    """The keyword arguments beyond the tensors: only the options the configuration uses
    (``table``: the block table of a paged cache; ``sinks``: ``cfg.sink_logits()``)."""
    kw = {"causal": cfg.causal}
    if cfg.window:
        kw["window"] = cfg.window
    if rotary is not None:
        kw.update(rotary_cos=rotary[0], rotary_sin=rotary[1], rotary_interleaved=cfg.interleaved)
    if table is not None:
        kw["block_table"] = table
    if cfg.softcap:
        kw["softcap"] = cfg.softcap
    if sinks is not None:
        kw["sinks"] = sinks
    if cfg.chunk:
        kw["chunk"] = cfg.chunk
    return kw


def call_kv(target, cfg: KVCacheConfig, q, k_cache, v_cache, k, v, seqlens, **kw) -> torch.Tensor:
    """One call; the caches are written in place (also when the target runs in its worker)."""
    require_features(target, *features_of(cfg))
    out = impl(target, KV)(q, k_cache, v_cache, k=k, v=v, cache_seqlens=seqlens, **kw)
    return expect_tensor(out, KV, (*q.shape[:-1], v_cache.shape[-1]), q.dtype, q.device)


def seqlens(values, device) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32, device=device)


def feed(target, cfg: KVCacheConfig, q, k, v, k_cache, v_cache, *, rotary=None) -> torch.Tensor:
    """Feed positions 0 .. T-1 of every item through the target in ``cfg.chunks`` (the caches
    start empty: ``cfg.lengths`` is not used); returns the outputs, concatenated (B, Hq, T, Ev)."""
    outs, t = [], 0
    for n in cfg.chunks:
        s = slice(t, t + n)
        outs.append(call_kv(target, cfg, q[:, :, s], k_cache, v_cache, k[:, :, s], v[:, :, s],
                            seqlens([t] * cfg.batch, q.device), **options(cfg, rotary)))
        t += n
    return torch.cat(outs, dim=-2)


def prefilled(cfg: KVCacheConfig, k, v, device, *, poison_from=None, q=None, poison_before=None):
    """Caches in which item b holds its first ``cfg.prior[b]`` keys/values (written by the harness)
    and random values elsewhere; ``poison_from`` (per item): slots from there on hold +-1e4, or
    ``poison_before`` (per item): the slots before it (keys shrunk by ``extreme_shrink`` so that the raw
    scores of ``q`` stay below a quarter of the dtype's max, as ``suites.attention.helpers.poison``
    does: an overflow before masking tests no mask)."""
    kc, vc = cfg.garbage_cache(device)
    for b, c in enumerate(cfg.prior):
        kc[b, :, :c], vc[b, :, :c] = k[b, :, :c], v[b, :, :c]
    spans = ([slice(c, None) for c in poison_from] if poison_from is not None else
             [slice(0, s) for s in poison_before] if poison_before is not None else None)
    if spans is not None:
        g = cfg.generator(salt=9)
        shrink = extreme_shrink(cfg, q, kc.dtype)
        for b, span in enumerate(spans):
            kc[b, :, span] = (extreme_like(kc[b, :, span], g).double() * shrink).to(kc.dtype)
            vc[b, :, span] = extreme_like(vc[b, :, span], g)
    return kc, vc


def new_tokens(cfg: KVCacheConfig, t):
    """Of a (B, H, T, D) tensor, item b's positions prior[b] .. prior[b] + Lnew - 1, as (B, H, Lnew, D)."""
    n = cfg.chunks[0]
    return torch.stack([t[b, :, c:c + n] for b, c in enumerate(cfg.prior)])


def one_call_truth(cfg: KVCacheConfig, q, kc, vc, k, v, *, extent="w", table=None):
    """(truth (out, k_cache, v_cache) in float64, naive out in the input dtype) for one call
    (``table``: kc and vc are a paged pool read through it)."""
    args = [x.cpu() for x in (q, kc, vc, k, v)]
    kw = dict(cache_seqlens=torch.tensor(cfg.prior), window=cfg.window or None, causal=cfg.causal, extent=extent,
              block_table=None if table is None else table.cpu(), chunk=cfg.chunk or None)
    truth = kvcache_math(*args, **kw)
    naive = kvcache_math(*args, **kw, compute_dtype=q.dtype)[0]
    return truth, naive


def rotated(cfg: KVCacheConfig, x, rotary, compute_dtype=torch.float64):
    """x (B, H, T, D) rotated at positions 0 .. T-1 with the tables (truth: float64 math on them)."""
    pos = torch.arange(x.shape[-2])
    return rotate(x.cpu(), pos, rotary[0].cpu(), rotary[1].cpu(), cfg.interleaved, compute_dtype)


def first_difference(a: torch.Tensor, b: torch.Tensor) -> tuple[int, ...]:
    """The first index (batch, head, slot, dim) where two tensors differ."""
    return tuple(int(i) for i in (a != b).nonzero()[0])


def assert_cache_holds(kc, vc, k, v, slots, positions, what: str, *, item: int = 0) -> None:
    """Cache slots ``slots`` hold exactly the keys/values at ``positions`` (a copy is exact);
    ``item``: the batch index of the first item passed (in messages)."""
    for name, cache, fed in (("k_cache", kc, k), ("v_cache", vc, v)):
        got, want = cache[:, :, slots].cpu(), fed[:, :, positions].cpu()
        if not torch.equal(got, want):
            b, h, i, _ = first_difference(got, want)
            raise AssertionError(f"{what}: {name}[{item + b}, {h}, slot {int(slots[i])}] does not hold the value fed at "
                                 f"position {int(positions[i])} (the new keys/values must be written into the cache)")


def assert_close(out, truth, naive, dtype, what: str) -> tolerance.Comparison:
    """``out`` equals ``truth`` under the tolerance policy (``tolerance.assert_close``), else AssertionError."""
    return tolerance.assert_close(out, truth, naive, dtype=dtype, what=what)


# -- paged caches (suites/kvcache/test_paged_kvcache.py) --------------------------------------
def extreme_shrink(cfg: KVCacheConfig, q, dtype) -> float:
    """The factor that keeps +-1e4 keys' raw scores below a quarter of the dtype's max."""
    peak = float(q.double().abs().sum(-1).max()) * EXTREME / cfg.E ** 0.5
    return min(1.0, torch.finfo(dtype).max / 4 / peak) if peak > 0 else 1.0


def pool(cfg: KVCacheConfig, k, v, table, device, poison_q=None):
    """(k_pool, v_pool), (num_blocks, Hkv, block_size, E|Ev): random values (a reused pool), with
    item b's first ``cfg.prior[b]`` keys/values written through its table row by the harness;
    ``poison_q`` (the queries): every slot that holds no cached position of any item (the last
    pages' unfilled slots, the pages not reached yet, the spare pages) holds +-1e4 instead."""
    g, shape = cfg.generator(salt=3), (cfg.num_blocks, cfg.hkv, cfg.block_size)
    kc = torch.randn(*shape, cfg.E, generator=g).to(cfg.torch_dtype).to(device)
    vc = torch.randn(*shape, cfg.Ev, generator=g).to(cfg.torch_dtype).to(device)
    if poison_q is not None:
        filled = torch.zeros(cfg.num_blocks, cfg.block_size, dtype=torch.bool)
        for b, c in enumerate(cfg.prior):
            pos = torch.arange(c)
            filled[table[b].cpu().long()[pos // cfg.block_size], pos % cfg.block_size] = True
        g, empty = cfg.generator(salt=9), (~filled)[:, None, :, None].to(device)
        kc = torch.where(empty, (extreme_like(kc, g).double() * extreme_shrink(cfg, poison_q, kc.dtype)).to(kc.dtype), kc)
        vc = torch.where(empty, extreme_like(vc, g), vc)
    for b, c in enumerate(cfg.prior):
        pos = torch.arange(c, device=device)
        scatter(kc, b, pos, k[b, :, :c], table)
        scatter(vc, b, pos, v[b, :, :c], table)
    return kc, vc


def logical(cache, table, cfg: KVCacheConfig) -> torch.Tensor:
    """(B, Hkv, slots, D): each item's logical cache, read through its table row (a linear cache
    with the same contents)."""
    pos = torch.arange(cfg.slots, device=cache.device)
    return torch.stack([gather(cache, b, pos, table) for b in range(cfg.batch)])


def chunk_of(cfg: KVCacheConfig, x, t: int, n: int):
    """Of a (B, H, T, D) tensor, item b's positions prior[b] + t .. prior[b] + t + n - 1, as (B, H, n, D)."""
    return torch.stack([x[b, :, c + t:c + t + n] for b, c in enumerate(cfg.prior)])


def feed_prior(target, cfg: KVCacheConfig, q, k, v, k_cache, v_cache, *, table=None, sinks=None,
               rotary=None) -> torch.Tensor:
    """Feed each item's positions from prior[b] on through the target in ``cfg.chunks`` (the
    caches hold the first prior[b]); returns the outputs, concatenated (B, Hq, sum(chunks), Ev)."""
    outs, t = [], 0
    for n in cfg.chunks:
        lens = seqlens([c + t for c in cfg.prior], q.device)
        outs.append(call_kv(target, cfg, chunk_of(cfg, q, t, n), k_cache, v_cache, chunk_of(cfg, k, t, n),
                            chunk_of(cfg, v, t, n), lens, **options(cfg, rotary, table=table, sinks=sinks)))
        t += n
    return torch.cat(outs, dim=-2)


def truth_prior(cfg: KVCacheConfig, q, k, v, k_cache, v_cache, *, table=None, sinks=None, rotary=None,
                extent: str = "w"):
    """The float64 reference fed as ``feed_prior`` feeds the target, on CPU copies of the caches
    (linear, or paged with ``table``; ``rotary``: the (cos, sin) tables; ``extent``: the window's):
    (truth out, naive out in the input dtype, k_cache and v_cache after the calls)."""
    kc, vc, truth, naive, t = k_cache.cpu(), v_cache.cpu(), [], [], 0
    kw = dict(window=cfg.window or None, causal=cfg.causal, softcap=cfg.softcap or None, extent=extent,
              block_table=None if table is None else table.cpu(), sinks=None if sinks is None else sinks.cpu())
    if rotary is not None:
        kw.update(rotary_cos=rotary[0].cpu(), rotary_sin=rotary[1].cpu(), rotary_interleaved=cfg.interleaved)
    for n in cfg.chunks:
        args = [chunk_of(cfg, x, t, n).cpu() for x in (q, k, v)]
        lens = torch.tensor([c + t for c in cfg.prior])
        naive.append(kvcache_math(args[0], kc, vc, *args[1:], cache_seqlens=lens, compute_dtype=q.dtype, **kw)[0])
        out, kc, vc = kvcache_math(args[0], kc, vc, *args[1:], cache_seqlens=lens, **kw)
        truth.append(out)
        t += n
    return torch.cat(truth, dim=-2), torch.cat(naive, dim=-2), kc, vc


def describe_paged(cfg: KVCacheConfig) -> str:
    return (f"block_size {cfg.block_size}, {cfg.max_blocks} pages per item in a pool of {cfg.num_blocks}, "
            f"cache_seqlens {list(cfg.prior)}, calls {cfg.chunks}")
