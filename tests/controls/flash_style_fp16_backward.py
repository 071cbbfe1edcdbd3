"""A correct control (not a bug): scaled dot-product attention with a hand-written backward in
the FlashAttention style, as users write it for float16.

    forward:  P = softmax(Q K^T * scale + bias) in float32, O = P V rounded to the input dtype
    backward: D = rowsum(dO * O) (from the *saved, rounded* output, as FlashAttention does),
              dP = dO V^T computed in the input dtype (a float16 matmul), dS = P (dP - D),
              dQ = dS K * scale, dK = dS^T Q * scale, dV = P^T dO

After a value shift V + c, dP and D are both large and cancel in dP - D: the error of dk is of
the size of u(float16) x those terms, not of dk (tests/test_tolerance.py). It must pass every
attention gradient property. Dropout is not implemented (declared).
"""
from __future__ import annotations

import math

import torch

HARNESS_UNSUPPORTED = {"dropout"}


def _visible(L, S, attn_mask, is_causal, device):
    vis = torch.ones(L, S, dtype=torch.bool, device=device)
    if is_causal:
        vis = torch.ones(L, S, dtype=torch.bool, device=device).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        vis = vis & attn_mask
    return vis


def _wide(t):
    """float32 for half inputs (float64 stays float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


class _Flash(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, vis, bias, scale, group):
        qf = _wide(q)
        kf = _wide(k).repeat_interleave(group, dim=-3)
        vf = _wide(v).repeat_interleave(group, dim=-3)
        s = (qf @ kf.transpose(-2, -1)) * scale
        if bias is not None:
            s = s + _wide(bias)
        s = s.masked_fill(~vis, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(s - m)
        den = e.sum(-1, keepdim=True)
        P = torch.where(den > 0, e / den.clamp_min(1e-30), torch.zeros_like(e))
        out = (P @ vf).to(q.dtype)
        ctx.save_for_backward(q, k, v, P, out)
        ctx.scale, ctx.group = scale, group
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, P, out = ctx.saved_tensors
        scale, group = ctx.scale, ctx.group
        dt = q.dtype
        vr = v.repeat_interleave(group, dim=-3)
        kr = _wide(k).repeat_interleave(group, dim=-3)
        D = (_wide(dout) * _wide(out)).sum(-1, keepdim=True)  # rowsum(dO * O)
        dP = _wide(dout.to(dt) @ vr.transpose(-2, -1))  # in the input dtype
        dS = P * (dP - D)
        dq = (dS @ kr) * scale
        dk = (dS.transpose(-2, -1) @ _wide(q)) * scale
        dv = P.transpose(-2, -1) @ _wide(dout)
        if group > 1:
            dk, dv = (t.unflatten(-3, (k.shape[-3], group)).sum(-3) for t in (dk, dv))
        return dq.to(dt), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    if dropout_p:
        raise NotImplementedError("dropout")
    L, S = query.shape[-2], key.shape[-2]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    group = query.shape[-3] // key.shape[-3]
    vis = _visible(L, S, attn_mask, is_causal, query.device)
    bias = attn_mask if attn_mask is not None and attn_mask.dtype != torch.bool else None
    return _Flash.apply(query, key, value, vis, bias, scale, group)
