"""Banded sliding-window attention that really costs O(n * w), not O(n^2).

    query (B, H, L, E), key (B, H, S, E), value (B, H, S, Ev), L <= S
    output (B, H, L, Ev) in the query's dtype

Same visibility as ``reference.sliding_window`` (queries aligned to the end of
the keys; absolute query position p sees the keys p - window < j <= p, i.e.
``window`` keys; ``extent="w+1"`` sees window + 1 keys, FlashAttention's
convention).

How: the (padded) sequence is cut into query blocks of ``block`` rows. Query
block b only needs the keys from ``b*block - (reach-1)`` to ``b*block + block - 1``,
a span of ``block + reach - 1`` keys. ``Tensor.unfold`` (a strided view, no
copy) lays those spans out as (B, H, nb, E, span), so one batched matmul
computes nb blocks of (block x span) scores: n/block * block * span = n * span
scores, span = block + reach - 1 ~ 2 * window. Memory and FLOPs are linear in n
for a fixed window; the dense formulation materialises L x S scores.

The band mask inside a block is the same for every block (r <= c <= r + reach - 1
for query row r and key column c); the first blocks also mask their left padding.
The softmax runs in float32 (or float64 for float64 inputs), as Hugging Face's
eager attention does, and the result is cast back to the query's dtype.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _band(block: int, span: int, reach: int, device) -> torch.Tensor:
    """(block, span) bool: query row r sees key column c iff r <= c <= r + reach - 1."""
    r = torch.arange(block, device=device)[:, None]
    c = torch.arange(span, device=device)[None, :]
    return (c >= r) & (c <= r + reach - 1)


def banded_attention(query, key, value, window: int, scale=None, block: int | None = None,
                     extent: str = "w"):
    """Causal sliding-window attention in O(L * window) time and memory (see module doc)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    reach = {"w": window, "w+1": window + 1}.get(extent)
    if reach is None:
        raise ValueError(f"unknown window extent {extent!r}")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    if L > S:
        raise ValueError(f"banded attention needs L <= S (queries aligned to the end), got L={L}, S={S}")
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if L < S:  # queries at absolute positions S-L..S-1: pad dummy rows in front, drop them after
        query = F.pad(query, (0, 0, S - L, 0))
    blk = max(1, min(block or reach, S))
    nb = -(-S // blk)
    n_pad = nb * blk
    span = blk + reach - 1
    # keys/values: reach-1 zeros in front (masked), tail padding to a whole number of blocks
    kp = F.pad(key, (0, 0, reach - 1, n_pad - S))        # (B, H, reach-1+n_pad, E)
    vp = F.pad(value, (0, 0, reach - 1, n_pad - S))      # (B, H, reach-1+n_pad, Ev)
    qp = F.pad(query, (0, 0, 0, n_pad - S))              # (B, H, n_pad, E)
    qb = qp.unflatten(-2, (nb, blk))                     # (B, H, nb, blk, E)
    kb = kp.unfold(-2, span, blk)                        # (B, H, nb, E, span)   (view)
    vb = vp.unfold(-2, span, blk).transpose(-1, -2)      # (B, H, nb, span, Ev)  (view)
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    scores = torch.matmul(qb, kb).to(acc) * scale        # (B, H, nb, blk, span)
    # key column c of block b is absolute position b*blk - (reach-1) + c; < 0 is left padding
    b = torch.arange(nb, device=query.device)[:, None]
    c = torch.arange(span, device=query.device)[None, :]
    not_pad = (c >= (reach - 1) - b * blk)[:, None, :]  # (nb, 1, span)
    visible = _band(blk, span, reach, query.device) & not_pad  # (nb, blk, span)
    scores = scores.masked_fill(~visible, float("-inf"))
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(weights, vb)                      # (B, H, nb, blk, Ev)
    out = out.flatten(-3, -2)[..., :S, :]                # (B, H, S, Ev)
    return out[..., S - L:, :].to(query.dtype)


def sliding_window_attention(query, key, value, window, scale=None):
    """The protocol name, backed by the banded kernel (usable as ``--impl harness.bench.models.banded``)."""
    return banded_attention(query, key, value, window, scale)


def visible_keys(n: int, window: int, extent: str = "w") -> float:
    """Average number of keys a query sees in causal self-attention of length n."""
    reach = window + (1 if extent == "w+1" else 0)
    m = min(n, reach)
    total = m * (m + 1) // 2 + (n - m) * reach  # sum over i of min(i + 1, reach)
    return total / n
