"""Helpers of the KV-cache suite: calling ``attention_with_kvcache``, feeding a sequence through
it chunk by chunk, caches the harness fills itself, and the float64 truth."""
from __future__ import annotations

import torch

from harness import tolerance
from suites.kvcache.configs import KVCacheConfig
from harness.guard import expect_tensor
from harness.runner import impl, require_features
from reference.kvcache import kvcache_math, rotate
from suites.attention.helpers import EXTREME, extreme_like

KV = "attention_with_kvcache"


def features_of(cfg: KVCacheConfig) -> list[str]:
    """The ``HARNESS_UNSUPPORTED`` features the calls of ``cfg`` use."""
    used = [f for f, on in (("enable_gqa", cfg.hq != cfg.hkv), ("kvcache_window", cfg.window > 0),
                            ("kvcache_rotary", cfg.rotary_dim > 0)) if on]
    return used + [cfg.dtype]


def options(cfg: KVCacheConfig, rotary=None) -> dict:
    """The keyword arguments beyond the tensors: only the options the configuration uses."""
    kw = {"causal": cfg.causal}
    if cfg.window:
        kw["window"] = cfg.window
    if rotary is not None:
        kw.update(rotary_cos=rotary[0], rotary_sin=rotary[1], rotary_interleaved=cfg.interleaved)
    return kw


def call_kv(target, cfg: KVCacheConfig, q, k_cache, v_cache, k, v, seqlens, **kw) -> torch.Tensor:
    """One call; the caches are written in place (also when the target runs in its worker)."""
    require_features(target, *features_of(cfg))
    out = impl(target, KV)(q, k_cache, v_cache, k=k, v=v, cache_seqlens=seqlens, **kw)
    return expect_tensor(out, KV, (*q.shape[:-1], v_cache.shape[-1]), q.dtype, q.device)


def seqlens(values, device) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.int32, device=device)


def feed(target, cfg: KVCacheConfig, q, k, v, k_cache, v_cache, rotary=None) -> torch.Tensor:
    """Feed positions 0 .. T-1 of every item through the target in ``cfg.chunks`` (the caches
    start empty: ``cfg.lengths`` is not used); returns the outputs, concatenated (B, Hq, T, Ev)."""
    outs, t = [], 0
    for n in cfg.chunks:
        s = slice(t, t + n)
        outs.append(call_kv(target, cfg, q[:, :, s], k_cache, v_cache, k[:, :, s], v[:, :, s],
                            seqlens([t] * cfg.batch, q.device), **options(cfg, rotary)))
        t += n
    return torch.cat(outs, dim=-2)


def prefilled(cfg: KVCacheConfig, k, v, device, poison_from=None, q=None):
    """Caches in which item b holds its first ``cfg.prior[b]`` keys/values (written by the harness)
    and random values elsewhere; ``poison_from`` (per item): slots from there on hold +-1e4
    (keys shrunk so that the raw scores stay below a quarter of the dtype's max, as
    ``suites.attention.helpers.poison`` does: an overflow before masking tests no mask)."""
    kc, vc = cfg.garbage_cache(device)
    for b, c in enumerate(cfg.prior):
        kc[b, :, :c], vc[b, :, :c] = k[b, :, :c], v[b, :, :c]
    if poison_from is not None:
        g = cfg.generator(salt=9)
        scale = 1.0 / cfg.E ** 0.5
        peak = float(q.double().abs().sum(-1).max()) * EXTREME * scale
        shrink = min(1.0, torch.finfo(kc.dtype).max / 4 / peak) if peak > 0 else 1.0
        for b, c in enumerate(poison_from):
            kc[b, :, c:] = (extreme_like(kc[b, :, c:], g).double() * shrink).to(kc.dtype)
            vc[b, :, c:] = extreme_like(vc[b, :, c:], g)
    return kc, vc


def new_tokens(cfg: KVCacheConfig, t):
    """Of a (B, H, T, D) tensor, item b's positions prior[b] .. prior[b] + Lnew - 1, as (B, H, Lnew, D)."""
    n = cfg.chunks[0]
    return torch.stack([t[b, :, c:c + n] for b, c in enumerate(cfg.prior)])


def one_call_truth(cfg: KVCacheConfig, q, kc, vc, k, v, extent="w"):
    """(truth (out, k_cache, v_cache) in float64, naive out in the input dtype) for one call."""
    args = [x.cpu() for x in (q, kc, vc, k, v)]
    kw = dict(cache_seqlens=torch.tensor(cfg.prior), window=cfg.window or None, causal=cfg.causal, extent=extent)
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


def assert_cache_holds(kc, vc, k, v, slots, positions, what: str, item: int = 0) -> None:
    """Cache slots ``slots`` hold exactly the keys/values at ``positions`` (a copy is exact);
    ``item``: the batch index of the first item passed (in messages)."""
    for name, cache, fed in (("k_cache", kc, k), ("v_cache", vc, v)):
        got, want = cache[:, :, slots].cpu(), fed[:, :, positions].cpu()
        if not torch.equal(got, want):
            b, h, i, _ = first_difference(got, want)
            raise AssertionError(f"{what}: {name}[{item + b}, {h}, slot {int(slots[i])}] does not hold the value fed at "
                                 f"position {int(positions[i])} (the new keys/values must be written into the cache)")


def compare(out, truth, naive, dtype, what: str) -> tolerance.Comparison:
    return tolerance.assert_close(out, truth, naive, dtype=dtype, what=what)
