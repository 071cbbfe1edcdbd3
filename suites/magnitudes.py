"""Running-error magnitudes: the reference math (``reference/``) evaluated on absolute values, in float64.

``harness.spec.tolerance`` adds C_TERMS * u(dtype) * terms to the error it allows per element, where
``terms`` is the size of the quantities an element is formed from (a sum contributes
sum |terms|, a product |a| |b|, a difference |a| + |b|). Where the exact result cancels (it is
near zero, the terms are not) this is the rounding error any implementation carries; elsewhere
it is ~|result| and below the dtype's floor. Each function mirrors one formula of the module it
names; all return float64 CPU tensors shaped like the quantity they bound.
"""
from __future__ import annotations

import math

import torch

from harness.reference.attention import attention_math
from harness.reference.layernorm import trailing_dims


def _abs64(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().to(torch.float64).cpu().abs()


def attention_weights(q, k, attn_mask=None, is_causal=False, scale=None, enable_gqa=False) -> torch.Tensor:
    """P = softmax(Q K^T * scale + bias, masked) (..., Hq, L, S), float64: the reference's own
    weights (its output for the values V = I_S)."""
    q, k = q.detach().double().cpu(), k.detach().double().cpu()
    S = k.shape[-2]
    eye = torch.eye(S, dtype=torch.float64).expand(*k.shape[:-1], S)
    mask = attn_mask.detach().cpu() if attn_mask is not None else None
    return attention_math(q, k, eye, mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def attention_grad_terms(q, k, v, g, *, attn_mask=None, is_causal=False, scale=None,
                         enable_gqa=False) -> list[torch.Tensor]:
    """[dq, dk, dv] magnitudes of the attention backward for upstream dO = g (..., Hq, L, Ev):

        dP_abs = |dO| |V|^T,  D_abs = rowsum(P * dP_abs)  (>= rowsum |dO * O|, either form of D)
        dS_abs = P * (dP_abs + D_abs)                      (dS = P * (dP - D) cancels here)
        dQ_abs = scale * dS_abs |K|,  dK_abs = scale * dS_abs^T |Q|,  dV_abs = P^T |dO|

    dK and dV of a KV head sum over its query group (GQA)."""
    P = attention_weights(q, k, attn_mask, is_causal, scale, enable_gqa)  # (..., Hq, L, S)
    aq, ak, av, ag = (_abs64(t) for t in (q, k, v, g))
    group = q.shape[-3] // k.shape[-3]
    if group > 1:
        ak, av = (t.repeat_interleave(group, dim=-3) for t in (ak, av))
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    dp = ag @ av.transpose(-2, -1)
    ds = P * (dp + (P * dp).sum(-1, keepdim=True))
    dq = scale * ds @ ak
    dk = scale * ds.transpose(-2, -1) @ aq
    dv = P.transpose(-2, -1) @ ag
    if group > 1:
        dk, dv = (t.unflatten(-3, (k.shape[-3], group)).sum(-3) for t in (dk, dv))
    return [dq, dk, dv]


def _ln_parts(x, normalized_shape, eps):
    dims = trailing_dims(normalized_shape)
    h = x.detach().double().cpu()
    mean = h.mean(dims, keepdim=True)
    rstd = torch.rsqrt((h - mean).pow(2).mean(dims, keepdim=True) + eps)
    return dims, (h.abs() + mean.abs()) * rstd  # x - mean cancels: |x| + |mean|


def layer_norm_terms(x, normalized_shape, weight=None, bias=None, eps=1e-5) -> torch.Tensor:
    """LayerNorm's output magnitude: xhat_abs |w| + |b|, xhat_abs = (|x| + |mean|) rstd."""
    _, xhat = _ln_parts(x, normalized_shape, eps)
    out = xhat * (_abs64(weight) if weight is not None else 1.0)
    return out + (_abs64(bias) if bias is not None else 0.0)


def layer_norm_grad_terms(x, g, normalized_shape, weight=None, bias=None, eps=1e-5) -> list[torch.Tensor]:
    """[dx, dweight, dbias (those given)] magnitudes of LayerNorm's backward for upstream g:

        gw_abs = |g| |w|,  dx_abs = rstd (gw_abs + mean(gw_abs) + xhat_abs mean(gw_abs xhat_abs))
        dweight_abs = sum over tokens |g| xhat_abs,  dbias_abs = sum over tokens |g|"""
    dims, xhat = _ln_parts(x, normalized_shape, eps)
    h = x.detach().double().cpu()
    rstd = torch.rsqrt((h - h.mean(dims, keepdim=True)).pow(2).mean(dims, keepdim=True) + eps)
    ag = _abs64(g)
    gw = ag * (_abs64(weight) if weight is not None else 1.0)
    dx = rstd * (gw + gw.mean(dims, keepdim=True) + xhat * (gw * xhat).mean(dims, keepdim=True))
    lead = tuple(range(h.dim() - len(dims)))
    out = [dx]
    if weight is not None:
        out.append((ag * xhat).sum(lead))
    if bias is not None:
        out.append(ag.sum(lead))
    return out


def rms_norm_grad_terms(x, g, normalized_shape, weight=None, eps=1e-6) -> list[torch.Tensor]:
    """[dx, dweight (when given)] magnitudes of RMSNorm's backward for upstream g:

        dx_abs = rstd (gw_abs + |x| rstd^2 mean(gw_abs |x|)),  dweight_abs = sum over tokens |g| |x| rstd"""
    dims = trailing_dims(normalized_shape)
    h = x.detach().double().cpu()
    rstd = torch.rsqrt(h.pow(2).mean(dims, keepdim=True) + eps)
    ag = _abs64(g)
    gw = ag * (_abs64(weight) if weight is not None else 1.0)
    dx = rstd * (gw + h.abs() * rstd.pow(2) * (gw * h.abs()).mean(dims, keepdim=True))
    out = [dx]
    if weight is not None:
        out.append((ag * h.abs() * rstd).sum(tuple(range(h.dim() - len(dims)))))
    return out
