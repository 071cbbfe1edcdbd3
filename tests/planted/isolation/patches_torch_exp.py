"""Hostile target: patches ``torch.exp`` (and the softmax built on it) globally, then computes
attention with them. Its output is 0.2 off the truth; in-process the harness's own float64
reference used the patched functions too, so every property passed, and torch's SDPA, tested
in the same session, failed four."""
import torch

_exp = torch.exp


def _warm_exp(x, *args, **kwargs):
    return _exp(x * 1.2, *args, **kwargs)


def _softmax(x, dim=-1, *args, **kwargs):
    e = _warm_exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


torch.exp = _warm_exp
torch.softmax = _softmax
torch.Tensor.softmax = _softmax
torch.nn.functional.softmax = _softmax


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    E = query.shape[-1]
    scores = query @ key.transpose(-2, -1) * (scale if scale is not None else E ** -0.5)
    if is_causal:
        L, S = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=scores.device).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value
