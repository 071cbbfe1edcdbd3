"""A Mistral-style pre-norm decoder block with causal sliding-window attention.

    x (B, n, D) -> h = x + Wo * attn(rope(Wq * rms(x)), rope(Wk * rms(x)), Wv * rms(x))
                -> y = h + W2 * (silu(W1 * rms(h)) * W3 * rms(h))          (SwiGLU MLP)

Heads: H query heads of size E = D / H, Hkv key/value heads (GQA: query head h reads
KV head h // (H / Hkv), K/V repeated before the attention call). RoPE is rotate-half
(Llama / Mistral) with base 10000. Everything but the attention is per position, so
the block's receptive field is exactly its attention window: a stack of L blocks
with a window of w keys (i - w < j <= i) lets the last token see L * (w - 1) + 1
positions (L * w + 1 with FlashAttention's w + 1 keys).

``attn(q, k, v, window)`` is any function with the protocol's
``sliding_window_attention(query, key, value, window, scale=None)`` signature on
(B, H, n, E) tensors; the default is the dense float64-readable reference.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from harness.reference.sliding_window import sliding_window_math


def _reference_window(q, k, v, window, scale=None):
    return sliding_window_math(q, k, v, window, scale, compute_dtype=q.dtype)


def rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate-half RoPE on (B, H, n, E) at positions 0..n-1."""
    E, n = x.shape[-1], x.shape[-2]
    inv = base ** (-torch.arange(0, E, 2, dtype=torch.float64, device=x.device) / E)  # (E/2,)
    ang = torch.arange(n, dtype=torch.float64, device=x.device)[:, None] * inv[None, :]  # (n, E/2)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    x1, x2 = x[..., : E // 2], x[..., E // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SlidingWindowBlock(nn.Module):
    """One Mistral-style decoder layer; see the module docstring."""

    def __init__(self, dim: int, heads: int, window: int, kv_heads: int | None = None,
                 hidden: int | None = None, attn: Callable | None = None):
        super().__init__()
        kv_heads = kv_heads or heads
        if dim % heads or heads % kv_heads:
            raise ValueError(f"need dim % heads == 0 and heads % kv_heads == 0 ({dim}, {heads}, {kv_heads})")
        self.heads, self.kv_heads, self.head_dim, self.window = heads, kv_heads, dim // heads, window
        self.attn = attn or _reference_window
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        hidden = hidden or 2 * dim
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, n, D = x.shape
        h = self.norm1(x)
        q = self.wq(h).view(B, n, self.heads, self.head_dim).transpose(1, 2)      # (B, H, n, E)
        k = self.wk(h).view(B, n, self.kv_heads, self.head_dim).transpose(1, 2)   # (B, Hkv, n, E)
        v = self.wv(h).view(B, n, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rope(q), rope(k)
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        o = self.attn(q, k, v, self.window, 1.0 / math.sqrt(self.head_dim))     # (B, H, n, E)
        x = x + self.wo(o.transpose(1, 2).reshape(B, n, D))
        h = self.norm2(x)
        return x + self.w2(nn.functional.silu(self.w1(h)) * self.w3(h))


def block_stack(depth: int, dim: int, heads: int, window: int, *, attn: Callable | None = None,
                kv_heads: int | None = None, seed: int = 0, dtype=torch.float64) -> nn.Sequential:
    """``depth`` blocks with seeded random weights (no training needed for the receptive field)."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        stack = nn.Sequential(*[SlidingWindowBlock(dim, heads, window, kv_heads, attn=attn)
                                for _ in range(depth)])
    finally:
        torch.random.set_rng_state(gen_state)
    return stack.to(dtype)
