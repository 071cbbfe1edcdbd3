"""A correct ``mla_decode`` (FlashMLA's contract), computed in float32 (float64 kept), split into hooks.

Every planted-bug target in this folder subclasses ``MLA``, overrides ONE hook with a real-world
mistake and exports the bound method::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import MLA

    class Planted(MLA):
        def default_scale(self, D, head_dim_v):
            return head_dim_v ** -0.5             # BUG: the latent's dims

    mla_decode = Planted().mla_decode

Unmodified, ``MLA`` passes every latent-attention property (tests/test_planted_mla.py checks this):
q (B, Lq, Hq, D), kv_cache (B, Smax, Hkv, D) or a pool (N, block, Hkv, D) with block_table, values
kv_cache[..., :head_dim_v], scale D^-0.5 by default, causal bottom-right per item.
"""
from __future__ import annotations

import torch


class MLA:
    """Correct float32 latent attention; each method is one hook a planted bug overrides."""

    def default_scale(self, D: int, head_dim_v: int) -> float:
        return D ** -0.5

    def positions(self, kv_cache, block_table, b: int, n: int):
        """Item b's filled cache (n, Hkv, D)."""
        if block_table is None:
            return kv_cache[b, :n]
        block = kv_cache.shape[1]
        pos = torch.arange(n, device=kv_cache.device)
        return kv_cache[block_table[b].long()[pos // block], pos % block]

    def length(self, cache_seqlens, b: int, Smax: int) -> int:
        return int(cache_seqlens[b])

    def kv_head(self, h: int, Hq: int, Hkv: int) -> int:
        return h // (Hq // Hkv)

    def scores(self, q, k, scale, head_dim_v):
        """q (Lq, D), k (n, D) -> (Lq, n)."""
        return (q @ k.T) * scale

    def values(self, k, head_dim_v):
        return k[:, :head_dim_v]

    def visible(self, Lq: int, n: int, causal: bool, device):
        if not causal:
            return torch.ones(Lq, n, dtype=torch.bool, device=device)
        i = torch.arange(Lq, device=device)[:, None] + (n - Lq)
        return torch.arange(n, device=device)[None, :] <= i

    def mla_decode(self, q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True):
        B, Lq, Hq, D = q.shape
        Hkv = kv_cache.shape[2]
        scale = self.default_scale(D, head_dim_v) if scale is None else scale
        smax = kv_cache.shape[1] if block_table is None else block_table.shape[1] * kv_cache.shape[1]
        f = torch.float64 if q.dtype == torch.float64 else torch.float32  # (float32, float64 kept)
        out = torch.zeros(B, Lq, Hq, head_dim_v, dtype=f, device=q.device)
        for b in range(B):
            n = self.length(cache_seqlens, b, smax)
            cache = self.positions(kv_cache, block_table, b, n).to(f)  # (n, Hkv, D)
            mask = self.visible(Lq, n, causal, q.device)
            for h in range(Hq):
                k = cache[:, self.kv_head(h, Hq, Hkv)]
                s = self.scores(q[b, :, h].to(f), k, scale, head_dim_v).masked_fill(~mask, float("-inf"))
                out[b, :, h] = torch.softmax(s, dim=-1) @ self.values(k, head_dim_v)
        return out.to(q.dtype)


mla_decode = MLA().mla_decode
