"""Correct components with hand-written backwards (``torch.autograd.Function``), split into hooks.

Every planted-bug target in this folder subclasses one class here, overrides ONE backward hook
with a real-world mistake (the forward stays right) and exports the protocol name::

    import pathlib, sys; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import Attention

    class Planted(Attention):
        def softmax_backward(self, P, dP):
            return P * dP                              # BUG: the row-sum term is dropped

    scaled_dot_product_attention = Planted().scaled_dot_product_attention

Unmodified (``correct_custom_backward.py``) they pass every gradient property: attention in
float32 (causal top-left, bool/float masks, GQA, scale, dropout from torch's RNG with the keep mask
saved for the backward, the protocol's sliding window of w keys; FlashAttention's backward, P
recomputed),
LayerNorm/RMSNorm (float32 statistics), a pre-norm residual block, rotate-half RoPE and a
position table.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def _f32(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


class _SDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, q, k, v, visible, bias, scale, group, dropout_p=0.0):
        qf, kf, vf = _f32(q), impl.expand_kv(_f32(k), group), impl.expand_kv(_f32(v), group)
        P = impl.probs(qf, kf, scale, visible, bias)
        keep = torch.rand(P.shape, device=P.device) >= dropout_p if dropout_p else None  # torch's global RNG
        ctx.save_for_backward(qf, kf, vf, visible, bias, keep)
        ctx.impl, ctx.scale, ctx.group, ctx.dtypes, ctx.p = impl, scale, group, (q.dtype, k.dtype, v.dtype), dropout_p
        if keep is not None:
            P = P * keep.to(P.dtype) / (1 - dropout_p)
        return (P @ vf).to(q.dtype)

    @staticmethod
    def backward(ctx, dout):
        qf, kf, vf, visible, bias, keep = ctx.saved_tensors
        impl, scale = ctx.impl, ctx.scale
        dO = dout.to(qf.dtype)
        P = impl.backward_probs(qf, kf, scale, visible, bias)  # recomputed, as FlashAttention does
        dP = dO @ vf.transpose(-2, -1)
        if keep is not None:  # O = (P * M) V with M = keep / (1 - p): dV = (P * M)^T dO, dP = (dO V^T) * M
            M = impl.dropout_backward_multiplier(keep, ctx.p).to(P.dtype)
            dV, dP = impl.dv(P * M, dO, qf, kf, scale, bias), dP * M
        else:
            dV = impl.dv(P, dO, qf, kf, scale, bias)
        dS = impl.softmax_backward(P, dP)
        dQ, dK = impl.dq(dS, kf, scale), impl.dk(dS, qf, scale)
        dK, dV = impl.reduce_group(dK, ctx.group), impl.reduce_group(dV, ctx.group)
        dq_t, dk_t, dv_t = ctx.dtypes
        return None, dQ.to(dq_t), dK.to(dk_t), dV.to(dv_t), None, None, None, None, None


class Attention:
    """scaled_dot_product_attention with a hand-written backward; each method is a hook."""

    def expand_kv(self, t, group):
        return t.repeat_interleave(group, dim=-3)

    def probs(self, q, k, scale, visible, bias):
        """P = softmax(q k^T * scale + bias, masked); rows with no visible key are zeros."""
        s = (q @ k.transpose(-2, -1)) * scale
        if bias is not None:
            s = s + bias.to(s.dtype)
        if visible is not None:
            s = s.masked_fill(~visible, float("-inf"))
        m = s.amax(-1, keepdim=True)
        return self.normalize(torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m))))

    def normalize(self, w):
        """Rows of exp(scores) to probabilities; a row with no visible key (all zero) stays zeros."""
        d = w.sum(-1, keepdim=True)
        return torch.where(d > 0, w / d.clamp_min(torch.finfo(w.dtype).tiny), torch.zeros_like(w))

    def backward_probs(self, q, k, scale, visible, bias):
        return self.probs(q, k, scale, visible, bias)

    def dv(self, P, dO, q, k, scale, bias):
        return P.transpose(-2, -1) @ dO

    def dropout_backward_multiplier(self, keep, p):
        """The forward's dropout, for the backward: its saved keep mask, rescaled by 1/(1 - p)."""
        return keep / (1 - p)

    def softmax_backward(self, P, dP):
        return P * (dP - (P * dP).sum(-1, keepdim=True))

    def dq(self, dS, k, scale):
        return (dS @ k) * scale

    def dk(self, dS, q, scale):
        return (dS.transpose(-2, -1) @ q) * scale

    def reduce_group(self, d, group):
        """(..., Hq, S, D) -> (..., Hkv, S, D): KV head j collects query heads j*G .. j*G+G-1."""
        return d.unflatten(-3, (d.shape[-3] // group, group)).sum(-3)

    def causal_visible(self, L, S, device):
        return torch.arange(S, device=device)[None, :] <= torch.arange(L, device=device)[:, None]

    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        hq, hkv = query.shape[-3], key.shape[-3]
        if hq != hkv and (not enable_gqa or hq % hkv):
            raise ValueError(f"query has {hq} heads, key {hkv}: needs enable_gqa and Hq % Hkv == 0")
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        visible = self.causal_visible(query.shape[-2], key.shape[-2], query.device) if is_causal else None
        bias = None
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            visible = attn_mask if visible is None else visible & attn_mask
        elif attn_mask is not None:
            bias = attn_mask
        return _SDPA.apply(self, query, key, value, visible, bias, scale, hq // hkv, float(dropout_p))

    def window_visible(self, L, S, window, device):
        """The protocol's window: row i (absolute position p = i + S - L) sees p - window < j <= p."""
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j <= p) & (j > p - window)

    def sliding_window_attention(self, query, key, value, window, scale=None):
        """(B, H, L, E), (B, H, S, E), (B, H, S, Ev) -> (B, H, L, Ev): the SDPA Function, window-masked."""
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        visible = self.window_visible(query.shape[-2], key.shape[-2], window, query.device)
        return _SDPA.apply(self, query, key, value, visible, None, scale, 1)


def _lead(x, nd):
    return tuple(range(x.dim() - nd))


class _LayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, x, weight, bias, nd, eps):
        h, dims = _f32(x), tuple(range(-nd, 0))
        mean = h.mean(dims, keepdim=True)
        rstd = torch.rsqrt((h - mean).pow(2).mean(dims, keepdim=True) + eps)
        xhat = (h - mean) * rstd
        ctx.save_for_backward(h, xhat, rstd, weight)
        ctx.impl, ctx.nd, ctx.has_bias = impl, nd, bias is not None
        y = xhat if weight is None else xhat * weight.to(h.dtype)
        return (y if bias is None else y + bias.to(h.dtype)).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        h, xhat, rstd, weight = ctx.saved_tensors
        impl, nd, g = ctx.impl, ctx.nd, dy.to(h.dtype)
        gw = g if weight is None else g * weight.to(h.dtype)
        rstd = impl.ln_backward_rstd(h, rstd, tuple(range(-nd, 0)))
        dx = impl.ln_dx(gw, xhat, rstd, tuple(range(-nd, 0))).to(dy.dtype)
        dw = None if weight is None else impl.ln_dweight(g, xhat, h).sum(_lead(h, nd)).to(weight.dtype)
        db = g.sum(_lead(h, nd)).to(weight.dtype) if ctx.has_bias else None
        return None, dx, dw, db, None, None


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, x, weight, nd, eps):
        h = _f32(x)
        rstd = torch.rsqrt(h.pow(2).mean(tuple(range(-nd, 0)), keepdim=True) + eps)
        ctx.save_for_backward(h, rstd, weight)
        ctx.impl, ctx.nd = impl, nd
        y = h * rstd
        return (y if weight is None else y * weight.to(h.dtype)).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        h, rstd, weight = ctx.saved_tensors
        g = dy.to(h.dtype)
        gw = g if weight is None else g * weight.to(h.dtype)
        dx = ctx.impl.rms_dx(gw, h, rstd, tuple(range(-ctx.nd, 0))).to(dy.dtype)
        dw = None if weight is None else (g * h * rstd).sum(_lead(h, ctx.nd)).to(weight.dtype)
        return None, dx, dw, None, None


class _Norm(nn.Module):
    def __init__(self, normalized_shape, eps, elementwise_affine, bias):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(shape)) if elementwise_affine and bias else None


class LayerNorm(_Norm):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias=True)

    def ln_dx(self, gw, xhat, rstd, dims):
        return rstd * (gw - gw.mean(dims, keepdim=True) - xhat * (gw * xhat).mean(dims, keepdim=True))

    def ln_backward_rstd(self, h, rstd, dims):
        """The 1/sqrt(var + eps) the backward uses: the forward's, saved."""
        return rstd

    def ln_dweight(self, g, xhat, h):
        return g * xhat

    def forward(self, x):
        return _LayerNormFn.apply(self, x, self.weight, self.bias, len(self.normalized_shape), self.eps)


class RMSNorm(_Norm):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__(normalized_shape, eps, elementwise_affine, bias=False)

    def rms_dx(self, gw, h, rstd, dims):
        return rstd * (gw - h * rstd.pow(2) * (gw * h).mean(dims, keepdim=True))

    def forward(self, x):
        eps = torch.finfo(_f32(x).dtype).eps if self.eps is None else self.eps
        return _RMSNormFn.apply(self, x, self.weight, len(self.normalized_shape), eps)


class _ResidualAdd(torch.autograd.Function):
    """x + h, with the backward split into the residual path's hook and the sublayer path's."""

    @staticmethod
    def forward(ctx, impl, x, h):
        ctx.impl = impl
        return x + h

    @staticmethod
    def backward(ctx, g):
        return None, ctx.impl.residual_dx(g), g


class PreNormBlock(nn.Module):
    """x + sublayer(norm(x)) with this file's LayerNorm and a hand-written residual add."""

    def __init__(self, dim, sublayer):
        super().__init__()
        self.norm, self.sublayer = LayerNorm(dim), sublayer

    def residual_dx(self, g):
        """The residual path's gradient: the identity."""
        return g

    def forward(self, x):
        return _ResidualAdd.apply(self, x, self.sublayer(self.norm(x)))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class _RopeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, x, ang):
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        ctx.save_for_backward(cos, sin, ang)
        ctx.impl = impl
        return x * cos + rotate_half(x) * sin

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.impl.backward_tables(*ctx.saved_tensors)
        return None, ctx.impl.rope_backward(g, cos, sin), None


class Rope:
    """Hugging Face-style rotate-half RoPE (angles in float32, float64 for float64 input)."""

    def backward_tables(self, cos, sin, ang):
        """The cos/sin tables the backward rotates with: the forward's, saved (``ang``: the angles)."""
        return cos, sin

    def rope_backward(self, g, cos, sin):
        """The transpose of the rotation: R(-m theta) g."""
        return g * cos - rotate_half(g) * sin

    def apply_rotary_embedding(self, x, positions, base=10000.0):
        dt = torch.float64 if x.dtype == torch.float64 else torch.float32
        D = x.shape[-1]
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).to(dt) / D))
        ang = positions.to(dt)[..., None] * inv.to(x.device)
        ang = torch.cat((ang, ang), -1)
        if ang.dim() == 3:
            ang = ang[:, None]
        return _RopeFn.apply(self, x, ang)


class _LookupFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, impl, weight, positions):
        ctx.save_for_backward(positions)
        ctx.impl, ctx.shape = impl, weight.shape
        return weight[positions]

    @staticmethod
    def backward(ctx, g):
        (positions,) = ctx.saved_tensors
        grad = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return None, ctx.impl.accumulate(grad, positions.reshape(-1), g.reshape(-1, ctx.shape[-1])), None


class LearnedPositionEmbedding(nn.Module):
    def __init__(self, max_positions, dim):
        super().__init__()
        self.max_positions = max_positions
        self.weight = nn.Parameter(torch.randn(max_positions, dim) * 0.02)

    def accumulate(self, grad, positions, rows):
        """Each upstream row added to its position's row (repeated positions sum)."""
        return grad.index_add_(0, positions, rows)

    def forward(self, positions):
        if bool(((positions < 0) | (positions >= self.max_positions)).any()):
            raise IndexError(f"positions must lie in [0, {self.max_positions})")
        return _LookupFn.apply(self, self.weight, positions)
