"""A correct ``attention_varlen`` (and the ``apply_rotary_embedding`` the packed-RoPE property
runs), computed in float32 (float64 for float64 inputs) on torch ops, split into hooks.

Every planted-bug target in this folder subclasses ``Varlen``, overrides ONE hook with a
real-world mistake and exports the bound methods::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import Varlen

    class Planted(Varlen):
        def kv_head(self, h, group, hkv):
            return h % hkv                          # BUG: heads dealt round-robin

    attention_varlen = Planted().attention_varlen

Unmodified it passes every varlen property (tests/test_planted_varlen.py checks this). As a
varlen kernel does it: each sequence's rows are sliced by cu_seqlens, scores masked bottom-right
per sequence (and by the window), softcapped before the mask, softmax with the sink logit in the
denominator, rows with no visible key zeros.
"""
from __future__ import annotations

import math

import torch


class Varlen:
    """Correct packed attention; each method is one hook a planted bug overrides."""

    def sequences(self, cu_q, cu_k):
        """[(qs, qe, ks, ke)] of every sequence, from cu_seqlens."""
        q, k = cu_q.tolist(), cu_k.tolist()
        return [(q[b], q[b + 1], k[b], k[b + 1]) for b in range(len(q) - 1)]

    def key_range(self, ks: int, ke: int, max_k: int) -> tuple[int, int]:
        """The packed rows of k/v a sequence reads: its own."""
        return ks, ke

    def offset(self, Lq: int, Lk: int, max_q: int, max_k: int) -> int:
        """Query i's position minus i: bottom-right in its own sequence."""
        return Lk - Lq

    def kv_head(self, h: int, group: int, hkv: int) -> int:
        return h // group

    def reach(self, window: int) -> int:
        """How many keys up to its own a query sees under a window (the protocol's w)."""
        return window

    def scores(self, q, k, scale: float, softcap):
        """(H, Lq, Lk): q.k * scale, then capped."""
        s = (q @ k.transpose(-2, -1)) * scale
        return softcap * torch.tanh(s / softcap) if softcap else s

    def sink_logit(self, sinks, scale: float):
        """The logit a head's sink adds to the denominator: the learned value itself."""
        return sinks

    def grad_surrogate(self, ctx: dict):
        """What the backward differentiates (None: the forward itself); ``ctx``: the sequence's
        qb, kb, vb, visible, scale, softcap, sinks and the packed qf, kf, vf, heads, qs, ks, ke."""
        return None

    def attend(self, q, k, v, visible, scale, softcap, sinks):
        """q (H, Lq, E), k/v (H, Lk, E|Ev) (heads already mapped), visible (Lq, Lk) -> (H, Lq, Ev)."""
        s = self.scores(q, k, scale, softcap).masked_fill(~visible, float("-inf"))
        m = s.amax(-1, keepdim=True) if s.shape[-1] else torch.full((*s.shape[:-1], 1), float("-inf"), dtype=s.dtype)
        if sinks is not None:
            sink = self.sink_logit(sinks, scale).to(s.dtype).reshape(-1, 1, 1).expand_as(m)
            m = torch.maximum(m, sink)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        w = torch.exp(s - m)
        den = w.sum(-1, keepdim=True)
        if sinks is not None:
            den = den + torch.exp(sink - m)
        w = torch.where(den > 0, w / den.clamp_min(torch.finfo(s.dtype).tiny), torch.zeros_like(w))
        return w @ v

    def chunk_of(self, positions, chunk: int, start: int):
        """The chunk of each position of a sequence whose first row is packed row ``start``."""
        return positions // chunk

    def attention_varlen(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                         window=None, scale=None, softcap=None, sinks=None, chunk=None):
        dt = torch.promote_types(q.dtype, torch.float32)
        qf, kf, vf = q.to(dt), k.to(dt), v.to(dt)
        hq, hkv = q.shape[1], k.shape[1]
        heads = torch.tensor([self.kv_head(h, hq // hkv, hkv) for h in range(hq)], device=q.device)
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        sinks = None if sinks is None else sinks.to(dt)
        out = torch.zeros(q.shape[0], hq, v.shape[-1], dtype=dt, device=q.device)
        pieces = []
        for qs, qe, ks, ke in self.sequences(cu_seqlens_q, cu_seqlens_k):
            ks, ke = self.key_range(ks, ke, max_seqlen_k)
            if qe == qs:
                continue
            qb = qf[qs:qe].transpose(0, 1)
            kb = kf[ks:ke].index_select(1, heads).transpose(0, 1)
            vb = vf[ks:ke].index_select(1, heads).transpose(0, 1)
            Lq, Lk = qb.shape[1], kb.shape[1]
            pos = torch.arange(Lq, device=q.device)[:, None] + self.offset(Lq, Lk, max_seqlen_q, max_seqlen_k)
            j = torch.arange(Lk, device=q.device)[None, :]
            visible = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device)
            if causal:
                visible &= j <= pos
            if window is not None:
                visible &= j > pos - self.reach(window)
            if chunk is not None:
                visible &= self.chunk_of(j, chunk, ks) == self.chunk_of(pos, chunk, ks)
            seq = self.attend(qb, kb, vb, visible, scale, softcap, sinks)
            other = self.grad_surrogate(dict(qb=qb, kb=kb, vb=vb, visible=visible, scale=scale, softcap=softcap,
                                             sinks=sinks, qf=qf, kf=kf, vf=vf, heads=heads, qs=qs, ks=ks, ke=ke))
            if other is not None:  # (a planted backward: the forward's value, the surrogate's gradient)
                seq = seq.detach() + (other - other.detach())
            pieces.append((qs, qe, seq.transpose(0, 1)))
        for qs, qe, seq in pieces:
            out = out.index_copy(0, torch.arange(qs, qe, device=q.device), seq)
        return out.to(q.dtype)

    # -- RoPE (rotate-half), for the packed-documents property ---------------------------------
    def rope_positions(self, positions, L: int):
        """The position of each of the L rows: the ones given."""
        return positions

    def apply_rotary_embedding(self, x, positions, base=10000.0):
        """x (B, H, L, D) rotated at positions (L,) or (B, L), rotate-half pairs, float64 angles."""
        D = x.shape[-1]
        pos = self.rope_positions(positions, x.shape[-2]).to(torch.float64)
        theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)
        ang = pos[..., None] * theta
        ang = ang[:, None] if ang.dim() == 3 else ang
        cos, sin = ang.cos(), ang.sin()
        dt = torch.promote_types(x.dtype, torch.float32)
        a, b = x[..., : D // 2].to(dt), x[..., D // 2:].to(dt)
        cos, sin = cos.to(dt), sin.to(dt)
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


attention_varlen = Varlen().attention_varlen
apply_rotary_embedding = Varlen().apply_rotary_embedding
