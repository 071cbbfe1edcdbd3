"""A correct ``attention_with_kvcache`` built on torch SDPA, split into hooks.

Every planted-bug target in this folder subclasses ``KVCache``, overrides ONE hook with a
real-world mistake and exports the bound method::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import KVCache

    class Planted(KVCache):
        def write(self, cache, b, slots, new):
            pass                                    # BUG: the new keys are never cached

    attention_with_kvcache = Planted().attention_with_kvcache

Unmodified it passes every kvcache property (tests/test_planted_kvcache.py checks this). As a
decoding kernel does it: a linear cache is written first and attended up to the filled length
(``F.scaled_dot_product_attention`` with a bottom-right causal mask and ``enable_gqa``); a
rolling cache (a window, more positions than slots) gathers the keys it holds before the write,
attends over them and the new ones, then writes the last Smax new ones at slot p mod Smax.
RoPE is applied in float32 (float64 for float64 inputs) at positions cache_seqlens[b] + i.
A paged cache (``block_table``) is written through the table (``physical``), then each item's
pages (``pages``) are gathered into its logical cache and attended as a linear one. With
``softcap`` or ``sinks`` the attention is the textbook math in float32 (float64 for float64):
scores capped before the mask (``capped``), the sink's term in the denominator (``sink_term``).
With ``chunk`` (Llama 4's chunked attention) a query also needs its key in its own chunk, counted
from position 0 (``chunk_visible``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


class KVCache:
    """Correct attention over a KV cache; each method is one hook a planted bug overrides."""

    def lengths(self, cache_seqlens, batch: int) -> list[int]:
        """cache_seqlens (an int or (B,)) as one int per batch item."""
        if isinstance(cache_seqlens, int):
            return [cache_seqlens] * batch
        return [int(c) for c in cache_seqlens.tolist()]

    def start(self, c: int) -> int:
        """The position of the first new token: right after the c cached ones."""
        return c

    def rotary_offset(self, c: int, start: int) -> int:
        """The position RoPE rotates the first new token at: its absolute position."""
        return start

    def reach(self, window: int) -> int:
        """How many keys up to its own a query sees under a window (the protocol's w)."""
        return window

    def write(self, cache, b: int, slots, new) -> None:
        """cache[b, :, slots] = new."""
        cache[b, :, slots] = new

    def rotate(self, x, pos, cos, sin, interleaved: bool):
        """x (H, N, E): its first R dims rotated at ``pos`` (N,), in float32 (float64 for float64)."""
        R = 2 * cos.shape[-1]
        dt = torch.promote_types(x.dtype, torch.float32)
        c, s = cos[pos].to(dt), sin[pos].to(dt)
        xf = x.to(dt).clone()
        if interleaved:
            a, b = xf[..., 0:R:2].clone(), xf[..., 1:R:2].clone()
            xf[..., 0:R:2], xf[..., 1:R:2] = a * c - b * s, a * s + b * c
        else:
            a, b = xf[..., :R // 2].clone(), xf[..., R // 2:R].clone()
            xf[..., :R // 2], xf[..., R // 2:R] = a * c - b * s, a * s + b * c
        return xf.to(x.dtype)

    def mask(self, q_pos, key_pos, causal: bool, window):
        visible = torch.ones(len(q_pos), len(key_pos), dtype=torch.bool, device=q_pos.device)
        if causal:
            visible &= key_pos[None, :] <= q_pos[:, None]
        if window is not None:
            visible &= key_pos[None, :] > q_pos[:, None] - self.reach(window)
        return visible

    def chunk_visible(self, q_pos, key_pos, chunk: int):
        """(Lq, N) bool: key j in query p's chunk, j // chunk == p // chunk (absolute positions)."""
        return (key_pos[None, :] // chunk) == (q_pos[:, None] // chunk)

    def visible(self, q_pos, key_pos, causal: bool, window, chunk):
        """``mask`` and, with a chunk, ``chunk_visible``."""
        visible = self.mask(q_pos, key_pos, causal, window)
        return visible if not chunk else visible & self.chunk_visible(q_pos, key_pos, int(chunk))

    def physical(self, table, b: int, pos, block_size: int):
        """(blocks, slots) of item b's positions ``pos`` in a paged pool: through its table row."""
        return table[b].long()[pos // block_size], pos % block_size

    def pages(self, table, b: int, num_blocks: int):
        """The physical blocks of item b's logical pages, in order: its table row."""
        return table[b].long()

    def key_count(self, n: int, block_size: int) -> int:
        """How many logical positions of a paged item are attended: the n filled ones."""
        return n

    def capped(self, scores, visible, softcap):
        """Scores soft-capped, then masked (-inf where not visible)."""
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        return scores.masked_fill(~visible, float("-inf"))

    def sink_term(self, sinks, row_max):
        """The sink's term of the denominator, per query head: exp(sink - row max)."""
        return torch.exp(sinks.to(row_max.dtype)[:, None, None] - row_max)

    def attend(self, q, keys, vals, visible, scale, softcap=None, sinks=None):
        """q (Hq, Lq, E), keys (Hkv, N, E): torch SDPA with the boolean mask, GQA by enable_gqa;
        with softcap or sinks the same math written out in float32 (float64 for float64)."""
        if not softcap and sinks is None:
            return F.scaled_dot_product_attention(q[None], keys[None], vals[None], attn_mask=visible, scale=scale,
                                                  enable_gqa=q.shape[-3] != keys.shape[-3])[0]
        dt = torch.promote_types(q.dtype, torch.float32)
        g = q.shape[-3] // keys.shape[-3]
        qf, kf, vf = q.to(dt), keys.to(dt).repeat_interleave(g, 0), vals.to(dt).repeat_interleave(g, 0)
        scores = self.capped(qf @ kf.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale),
                             visible, softcap)
        row_max = scores.amax(-1, keepdim=True)
        if sinks is not None:
            row_max = torch.maximum(row_max, sinks.to(dt)[:, None, None])
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        weights = torch.exp(scores - row_max)
        denom = weights.sum(-1, keepdim=True)
        if sinks is not None:
            denom = denom + self.sink_term(sinks, row_max)
        out = torch.where(denom > 0, weights / denom.clamp_min(torch.finfo(dt).tiny), 0.0) @ vf
        return out.to(q.dtype)

    def paged(self, qb, kb, vb, q_pos, pos, n, k_cache, v_cache, table, b, causal, window, scale, opts, chunk=None):
        """One item over a paged pool: write through the table, gather its pages, attend."""
        nb, Hkv, bs = k_cache.shape[:3]
        if n > table.shape[-1] * bs:
            raise ValueError(f"{n} positions do not fit {table.shape[-1]} pages of {bs}")
        if kb is not None:
            blocks, slots = self.physical(table, b, pos, bs)
            k_cache[blocks, :, slots] = kb.transpose(0, 1)
            v_cache[blocks, :, slots] = vb.transpose(0, 1)
        pages = self.pages(table, b, nb)
        keys = k_cache[pages].transpose(0, 1).reshape(Hkv, -1, k_cache.shape[-1])
        vals = v_cache[pages].transpose(0, 1).reshape(Hkv, -1, v_cache.shape[-1])
        count = self.key_count(n, bs)
        visible = self.visible(q_pos, torch.arange(count, device=qb.device), causal, window, chunk)
        return self.attend(qb, keys[:, :count], vals[:, :count], visible, scale, **opts)

    def attention_with_kvcache(self, q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None,
                               causal=True, scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False,
                               block_table=None, softcap=None, sinks=None, chunk=None):
        opts = {key: val for key, val in (("softcap", softcap), ("sinks", sinks)) if val is not None}
        B, Lq, Smax, dev = q.shape[0], q.shape[-2], k_cache.shape[-2], q.device
        n_new = 0 if k is None else k.shape[-2]
        outs = []
        for b, c in enumerate(self.lengths(cache_seqlens, B)):
            first = self.start(c)
            n = first + n_new
            pos = torch.arange(first, n, device=dev)
            q_pos = torch.arange(n - Lq, n, device=dev)
            qb, kb = q[b], None if k is None else k[b]
            if rotary_cos is not None:
                shift = self.rotary_offset(c, first) - first
                kb = self.rotate(kb, pos + shift, rotary_cos, rotary_sin, rotary_interleaved)
                qb = self.rotate(qb, (q_pos + shift).clamp_min(0), rotary_cos, rotary_sin, rotary_interleaved)
            if block_table is not None:
                outs.append(self.paged(qb, kb, None if v is None else v[b], q_pos, pos, n, k_cache, v_cache,
                                       block_table, b, causal, window, scale, opts, chunk))
                continue
            if n <= Smax:  # linear: write, then attend over the first n slots
                if kb is not None:
                    self.write(k_cache, b, pos, kb)
                    self.write(v_cache, b, pos, v[b])
                key_pos = torch.arange(n, device=dev)
                visible = self.visible(q_pos, key_pos, causal, window, chunk)
                outs.append(self.attend(qb, k_cache[b, :, :n], v_cache[b, :, :n], visible, scale, **opts))
                continue
            if min(x for x in (window, chunk, Smax + 1) if x) > Smax:
                raise ValueError(f"{n} positions do not fit a cache of {Smax} slots")
            old = torch.arange(max(0, c - Smax), c, device=dev)  # rolling: what the ring holds now
            keys = torch.cat([k_cache[b][:, old % Smax], kb], dim=-2)
            vals = torch.cat([v_cache[b][:, old % Smax], v[b]], dim=-2)
            visible = self.visible(q_pos, torch.cat([old, pos]), causal, window, chunk)
            outs.append(self.attend(qb, keys, vals, visible, scale, **opts))
            keep = slice(max(0, n_new - Smax), n_new)
            self.write(k_cache, b, pos[keep] % Smax, kb[:, keep])
            self.write(v_cache, b, pos[keep] % Smax, v[b][:, keep])
        return torch.stack(outs)


attention_with_kvcache = KVCache().attention_with_kvcache
