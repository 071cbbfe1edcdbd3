"""Correct position encodings, written as a library would (float32 where libraries use
float32), split into hooks.

Every planted-bug target in this folder subclasses one class here, overrides ONE hook
with a real-world mistake and exports the protocol name it breaks::

    import pathlib, sys; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import Rope

    class Planted(Rope):
        def inv_freq(self, dim, base, dtype):
            return ...                                   # BUG: ...

    apply_rotary_embedding = Planted().apply_rotary_embedding

Unmodified, these pass every position property (tests/test_planted_positions.py checks
it): Hugging Face-style RoPE (rotate-half pairs, angles in float32, float64 for float64
input, cos/sin in x's dtype), the paper's ALiBi, HF's T5 buckets, the interleaved
sinusoidal table, an nn.Parameter position table that raises out of range, and a stateful
rotary module with a cos/sin cache (tests/test_planted_stateful.py checks that one), and cached
ALiBi and T5 bias modules (tests/test_planted_bias_modules.py).
"""
from __future__ import annotations

import math

import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Rope:
    def angle_dtype(self, x):
        return torch.float64 if x.dtype == torch.float64 else torch.float32

    def inv_freq(self, dim, base, dtype):
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype) / dim))  # (D/2,)

    def positions(self, positions):
        return positions

    def angles(self, positions, inv_freq, dtype):
        return positions.to(dtype)[..., None] * inv_freq  # (..., L, D/2)

    def cos_sin(self, angles, x):
        emb = torch.cat((angles, angles), dim=-1)  # (..., L, D): pair i at (i, i + D/2)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def rotate(self, x, cos, sin):
        return x * cos + rotate_half(x) * sin

    def apply_rotary_embedding(self, x, positions, base=10000.0):
        dtype = self.angle_dtype(x)
        ang = self.angles(self.positions(positions), self.inv_freq(x.shape[-1], base, dtype).to(x.device), dtype)
        if ang.dim() == 3:  # positions (B, L): broadcast over heads
            ang = ang[:, None]
        cos, sin = self.cos_sin(ang, x)
        return self.rotate(x, cos, sin)


class CachedRotary(nn.Module):
    """The stateful ``RotaryEmbedding(dim, base)``, as Hugging Face's rotary modules cached it
    (LlamaRotaryEmbedding until 4.38): one cos/sin table for positions 0 .. n - 1, built in
    x's dtype on x's device (angles as ``Rope``), rebuilt when a call needs more rows or
    another dtype or device; ``forward(x, offset)`` slices rows offset .. offset + L - 1."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = int(dim), float(base)
        self.cache = None  # (key, rows, cos, sin)

    def key(self, x):
        return x.dtype, x.device  # what the table depends on besides its length

    def covers(self, rows, needed):
        return rows >= needed

    def rows(self, x, start, n):
        """cos, sin (n, D) for positions start .. start + n - 1, in x's dtype on its device."""
        rope, dtype = Rope(), Rope().angle_dtype(x)
        positions = torch.arange(start, start + n, device=x.device)
        return rope.cos_sin(rope.angles(positions, rope.inv_freq(self.dim, self.base, dtype).to(x.device), dtype), x)

    def lookup(self, x, offset, L):
        key, needed = self.key(x), offset + L
        if self.cache is None or self.cache[0] != key or not self.covers(self.cache[1], needed):
            self.cache = (key, needed, *self.rows(x, 0, needed))
        return self.cache[2][offset:needed], self.cache[3][offset:needed]

    def forward(self, x, offset=0):
        cos, sin = self.lookup(x, int(offset), x.shape[-2])
        return Rope().rotate(x, cos.to(x.dtype), sin.to(x.dtype))


def slopes_power_of_2(n):
    start = 2 ** (-2 ** -(math.log2(n) - 3))
    return [start * start ** i for i in range(n)]


class Alibi:
    def get_slopes(self, n):
        if math.log2(n).is_integer():
            return slopes_power_of_2(n)
        closest = 2 ** math.floor(math.log2(n))
        return slopes_power_of_2(closest) + self.get_slopes(2 * closest)[0::2][: n - closest]

    def distance(self, query_len, key_len):
        p = torch.arange(query_len)[:, None] + (key_len - query_len)  # queries aligned to the end
        return (p - torch.arange(key_len)[None, :]).float()  # (Lq, Lk)

    def head_slopes(self, num_heads):
        return torch.tensor(self.get_slopes(num_heads), dtype=torch.float32)

    def alibi_slopes(self, num_heads):
        return torch.tensor(self.get_slopes(num_heads), dtype=torch.float32)

    def alibi_bias(self, num_heads, query_len, key_len):
        return -self.head_slopes(num_heads)[:, None, None] * self.distance(query_len, key_len)[None]


class T5Buckets:
    """Hugging Face's T5Attention._relative_position_bucket, hook by hook."""

    def relative(self, relative_position):
        return relative_position

    def is_bidirectional(self, bidirectional):
        return bidirectional

    def max_exact(self, half, num_buckets):
        return half // 2

    def truncate(self, x):
        return x.to(torch.long)

    def cap(self, large, half):
        return torch.min(large, torch.full_like(large, half - 1))

    def finish(self, buckets):
        return buckets

    def t5_relative_position_bucket(self, relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_position = self.relative(relative_position)
        buckets = 0
        half = num_buckets
        if self.is_bidirectional(bidirectional):
            half = num_buckets // 2
            buckets += (relative_position > 0).to(torch.long) * half
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = self.max_exact(half, num_buckets)
        is_small = relative_position < max_exact
        large = max_exact + self.truncate(torch.log(relative_position.float() / max_exact)
                                          / math.log(max_distance / max_exact) * (half - max_exact))
        large = self.cap(large, half)
        return self.finish(buckets + torch.where(is_small, relative_position, large))


class Sinusoidal:
    def exponent(self, dim):
        j = torch.arange(dim, dtype=torch.float64)
        return 2 * torch.div(j, 2, rounding_mode="floor") / dim  # 2i/d for columns 2i and 2i+1

    def omega(self, dim):
        return 10000.0 ** -self.exponent(dim)  # (d,), one per column

    def table(self, num_positions, dim):
        ang = torch.arange(num_positions, dtype=torch.float64)[:, None] * self.omega(dim)[None]
        pe = torch.empty(num_positions, dim, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = ang[:, 0::2].sin(), ang[:, 1::2].cos()
        return pe.float()

    def sinusoidal_position_embedding(self, num_positions, dim):
        return self.table(num_positions, dim)


class Learned(nn.Module):
    def __init__(self, max_positions, dim):
        super().__init__()
        self.max_positions = max_positions
        self.weight = nn.Parameter(torch.randn(max_positions, dim) * 0.02)

    def index(self, positions):
        if bool(((positions < 0) | (positions >= self.max_positions)).any()):
            raise IndexError(f"positions must lie in [0, {self.max_positions})")
        return positions

    def forward(self, positions):
        return self.weight[self.index(positions)]



class CachedAlibi(nn.Module):
    """The cached ``AlibiPositionalBias(num_heads)`` as x-transformers writes it (1.22.17 on): the
    bias of the largest call so far kept as a buffer (it moves with ``.to``), rebuilt when a call
    needs more queries or keys, sliced for smaller calls from the END (rows ``-Lq:``, columns
    ``-Lk:``: the last queries over the last keys; ALiBi depends on key - query only)."""

    def __init__(self, num_heads):
        super().__init__()
        self.register_buffer("slopes", Alibi().head_slopes(num_heads).view(-1, 1, 1), persistent=False)
        self.register_buffer("bias", None, persistent=False)

    def covers(self, query_len, key_len):
        return self.bias is not None and self.bias.shape[-1] >= key_len and self.bias.shape[-2] >= query_len

    def piece(self, query_len, key_len):
        return self.bias[..., -query_len:, -key_len:]

    def forward(self, query_len, key_len):
        if self.covers(query_len, key_len):
            return self.piece(query_len, key_len)
        # -slope * |p - j|, x-transformers' symmetric form (a row's kink is at its own position, so a
        # slice from the wrong end shows; the signed form -slope * (p - j) is one row up to a constant)
        self.bias = -self.slopes * Alibi().distance(query_len, key_len).abs().to(self.slopes.device)[None]
        return self.bias


class CachedT5Bias(nn.Module):
    """``T5RelativePositionBias(num_heads, ...)``: an nn.Embedding table (``relative_attention_bias``)
    and the bucket indices of each (Lq, Lk) cached (they never change); the values are read from
    the table at every call."""

    def __init__(self, num_heads, bidirectional=True, num_buckets=32, max_distance=128):
        super().__init__()
        self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)
        self.buckets = {}

    def bucket_grid(self, query_len, key_len, device):
        q = torch.arange(query_len, device=device) + (key_len - query_len)  # queries at the end of the keys
        rp = torch.arange(key_len, device=device)[None, :] - q[:, None]  # key - query
        return T5Buckets().t5_relative_position_bucket(rp, self.bidirectional, self.num_buckets, self.max_distance)

    def lookup(self, query_len, key_len, device):
        key = (query_len, key_len, device)
        if key not in self.buckets:
            self.buckets[key] = self.bucket_grid(query_len, key_len, device)
        return self.buckets[key]

    def forward(self, query_len, key_len):
        weight = self.relative_attention_bias.weight
        return self.relative_attention_bias(self.lookup(query_len, key_len, weight.device)).permute(2, 0, 1)

apply_rotary_embedding = Rope().apply_rotary_embedding
alibi_slopes = Alibi().alibi_slopes
alibi_bias = Alibi().alibi_bias
t5_relative_position_bucket = T5Buckets().t5_relative_position_bucket
sinusoidal_position_embedding = Sinusoidal().sinusoidal_position_embedding
LearnedPositionEmbedding = Learned
RotaryEmbedding = CachedRotary
AlibiPositionalBias = CachedAlibi
T5RelativePositionBias = CachedT5Bias
