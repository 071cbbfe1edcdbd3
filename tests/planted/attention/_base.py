"""A correct scaled dot-product attention, computed in float32, split into hooks.

Every planted-bug target in this folder subclasses ``Attention``, overrides ONE
hook with a real-world mistake, and exports the bound methods::

    import sys, pathlib; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import Attention

    class Planted(Attention):
        def default_scale(self, query, key, value):
            return 1.0 / query.shape[-1]            # BUG: 1/E instead of 1/sqrt(E)

    scaled_dot_product_attention = Planted().scaled_dot_product_attention

Targets are loaded by file path (``importlib.util.spec_from_file_location``),
so they find this module by putting their own directory on ``sys.path``.

Unmodified, ``Attention`` passes every attention, sliding-window and chunked-attention property
(tests/test_planted_attention.py checks this): torch's SDPA contract, query
(..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, Ev); boolean mask
True = may attend, float mask added; causal is top-left; rows with no visible
key return zeros; the output has the query's dtype.
"""
from __future__ import annotations

import math

import torch

NEG_INF = float("-inf")


class Attention:
    """Correct float32 attention; each method is one hook a planted bug overrides."""

    compute_dtype = torch.float32

    # -- layout -----------------------------------------------------------------
    def to_compute(self, query, key, value):
        """Inputs in the compute dtype (copies: the inputs are never touched)."""
        dt = torch.promote_types(query.dtype, self.compute_dtype)
        return query.to(dt), key.to(dt), value.to(dt)

    def split_heads(self, t):
        """(..., H, N, D) as the kernel wants it; identity here."""
        return t

    def merge_heads(self, out):
        """Inverse of ``split_heads`` on the output (..., Hq, L, Ev)."""
        return out

    def expand_kv(self, t, group: int):
        """GQA: KV head g serves query heads g*group .. g*group+group-1."""
        return t.repeat_interleave(group, dim=-3)

    # -- scores -----------------------------------------------------------------
    def default_scale(self, query, key, value) -> float:
        return 1.0 / math.sqrt(query.shape[-1])

    def resolve_scale(self, scale, query, key, value) -> float:
        return self.default_scale(query, key, value) if scale is None else scale

    def scores(self, q, k, scale):
        return (q @ k.transpose(-2, -1)) * scale  # (..., Hq, L, S)

    def causal_visible(self, L: int, S: int, device):
        """top-left: query i sees keys j <= i (torch SDPA)."""
        i = torch.arange(L, device=device)[:, None]
        j = torch.arange(S, device=device)[None, :]
        return j <= i

    def bool_visible(self, attn_mask, scores):
        """A boolean mask: True = may attend."""
        return attn_mask

    def float_bias(self, attn_mask, scores):
        """A float mask: added to the scores."""
        return attn_mask.to(scores.dtype)

    def apply_visibility(self, scores, visible):
        """Hide the keys that are not visible (broadcast over batch and heads)."""
        return scores.masked_fill(~visible, NEG_INF)

    # -- softmax and output -----------------------------------------------------
    def softmax(self, scores):
        """Stable softmax over the keys; rows with no visible key give all-zero weights."""
        row_max = scores.amax(dim=-1, keepdim=True)
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        w = torch.exp(scores - row_max)
        denom = w.sum(dim=-1, keepdim=True)
        return torch.where(denom > 0, w / denom.clamp_min(torch.finfo(w.dtype).tiny), torch.zeros_like(w))

    def dropout(self, weights, dropout_p: float):
        if dropout_p > 0.0:
            return torch.nn.functional.dropout(weights, p=dropout_p, training=True)
        return weights

    def attend(self, q, k, v, scale, visible, bias, dropout_p):
        """The core: softmax(q k^T * scale + bias, masked) v."""
        s = self.scores(q, k, scale)
        if bias is not None:
            s = s + bias
        if visible is not None:
            s = self.apply_visibility(s, visible)
        w = self.dropout(self.softmax(s), dropout_p)
        return w @ v

    def finish(self, out, query):
        return out.to(query.dtype)

    # -- protocol names ---------------------------------------------------------
    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0,
                                     is_causal=False, scale=None, enable_gqa=False):
        q, k, v = self.to_compute(query, key, value)
        scale = self.resolve_scale(scale, q, k, v)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        hq, hkv = q.shape[-3], k.shape[-3]
        if hq != hkv:
            if not enable_gqa or hq % hkv:
                raise ValueError(f"query has {hq} heads, key {hkv}: needs enable_gqa and Hq % Hkv == 0")
            k, v = self.expand_kv(k, hq // hkv), self.expand_kv(v, hq // hkv)
        L, S = q.shape[-2], k.shape[-2]
        visible, bias = None, None
        if is_causal:
            visible = self.causal_visible(L, S, q.device)
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                m = self.bool_visible(attn_mask, q)
                visible = m if visible is None else visible & m
            else:
                bias = self.float_bias(attn_mask, q)
        out = self.attend(q, k, v, scale, visible, bias, dropout_p)
        return self.finish(self.merge_heads(out), query)

    def window_visible(self, L: int, S: int, window: int, device):
        """Queries aligned to the end of the keys: position p = i + S - L sees p - window < j <= p."""
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j <= p) & (j > p - window)

    def sliding_window_attention(self, query, key, value, window, scale=None):
        mask = self.window_visible(query.shape[-2], key.shape[-2], window, query.device)
        return self.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)

    def chunk_visible(self, L: int, S: int, chunk: int, device):
        """Queries aligned to the end of the keys: position p = i + S - L sees the keys j <= p of its chunk."""
        p = torch.arange(L, device=device)[:, None] + (S - L)
        j = torch.arange(S, device=device)[None, :]
        return (j <= p) & (j // chunk == p // chunk)

    def chunked_attention(self, query, key, value, chunk, scale=None):
        mask = self.chunk_visible(query.shape[-2], key.shape[-2], chunk, query.device)
        return self.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)


_correct = Attention()
scaled_dot_product_attention = _correct.scaled_dot_product_attention
sliding_window_attention = _correct.sliding_window_attention
chunked_attention = _correct.chunked_attention
