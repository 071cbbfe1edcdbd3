"""A user's kernels: a plain attention (correct) and an RMSNorm with a real-world bug (it divides
by the mean square, not by its square root)."""
import math

import torch
from torch import nn

__version__ = "0.3"


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v in float32; a row with no visible key gives zeros."""
    dt = torch.promote_types(query.dtype, torch.float32)
    q, k, v = query.to(dt), key.to(dt), value.to(dt)
    hq, hkv = q.shape[-3], k.shape[-3]
    if hq != hkv:
        if not enable_gqa or hq % hkv:
            raise ValueError(f"query has {hq} heads, key {hkv}: needs enable_gqa and Hq % Hkv == 0")
        k, v = k.repeat_interleave(hq // hkv, dim=-3), v.repeat_interleave(hq // hkv, dim=-3)
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    visible = None
    if is_causal:
        visible = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            visible = attn_mask if visible is None else visible & attn_mask
        else:
            s = s + attn_mask.to(dt)
    if visible is not None:
        s = s.masked_fill(~visible, float("-inf"))
    top = s.amax(dim=-1, keepdim=True)
    w = torch.exp(s - torch.where(torch.isfinite(top), top, torch.zeros_like(top)))
    total = w.sum(dim=-1, keepdim=True)
    w = torch.where(total > 0, w / total.clamp_min(torch.finfo(dt).tiny), torch.zeros_like(w))
    if dropout_p > 0.0:
        w = nn.functional.dropout(w, p=dropout_p, training=True)
    return (w @ v).to(query.dtype)


class RMSNorm(nn.Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape)) if elementwise_affine else None

    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        dims = tuple(range(h.dim() - len(self.normalized_shape), h.dim()))
        eps = torch.finfo(h.dtype).eps if self.eps is None else self.eps
        y = h / (h.pow(2).mean(dim=dims, keepdim=True) + eps)  # BUG: should be h * rsqrt(ms + eps)
        if self.weight is not None:
            y = y * self.weight.to(y.dtype)
        return y.to(x.dtype)
