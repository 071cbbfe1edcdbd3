"""ALiBi: attention with linear biases (Press et al., "Train Short, Test Long"), float64.

    slopes (H,): the paper's get_slopes(H): for H a power of two the geometric
        sequence 2^(-8/H), 2^(-16/H), ...; otherwise the slopes for the closest
        lower power of two 2^k followed by every other slope of get_slopes(2^(k+1))
    bias (H, Lq, Lk): the query at row i has absolute position p = i + Lk - Lq
        (queries aligned to the end of the keys); bias[h, i, j] = -slope_h * (p - j)

Softmax ignores a per-row constant, so slope_h * j (Bloom, which adds one row
for every query) is the same bias; compare causal keys j <= p up to that constant.

Under tensor parallelism a rank holds heads h0 .. h1 - 1 of the model's H and needs their slopes,
get_slopes(H)[h0:h1] (vLLM's and Megatron's ALiBi slice the full model's list): ``shard=(h0, h1)``.
get_slopes(h1 - h0), the slopes of a model as small as the shard, is the bug it rules out.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def get_slopes(n: int) -> list[float]:
    """The paper's reference code (ofirpress/attention_with_linear_biases), verbatim."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2])


def alibi_distance(query_len: int, key_len: int) -> torch.Tensor:
    """p - j for the query at row i (p = i + Lk - Lq) and key j: (Lq, Lk), >= 0 where causal."""
    p = torch.arange(query_len, dtype=torch.float64)[:, None] + (key_len - query_len)
    return p - torch.arange(key_len, dtype=torch.float64)[None, :]


def shard_slopes(num_heads: int, shard: tuple[int, int] | None = None) -> list[float]:
    """get_slopes(num_heads), or heads h0 .. h1 - 1 of it for ``shard=(h0, h1)``."""
    slopes = get_slopes(num_heads)
    if shard is None:
        return slopes
    h0, h1 = (int(h) for h in shard)
    if not 0 <= h0 < h1 <= num_heads:
        raise ValueError(f"shard {shard!r}: expected 0 <= h0 < h1 <= num_heads = {num_heads}")
    return slopes[h0:h1]


def alibi_math(num_heads: int, query_len: int, key_len: int, compute_dtype=torch.float64,
               shard: tuple[int, int] | None = None) -> torch.Tensor:
    """-slope_h * (p - j) in ``compute_dtype``: (H, Lq, Lk), or the shard's (h1 - h0, Lq, Lk)."""
    slopes = torch.tensor(shard_slopes(num_heads, shard), dtype=torch.float64).to(compute_dtype)
    dist = alibi_distance(query_len, key_len).to(compute_dtype)
    return -slopes[:, None, None] * dist[None]


def alibi_slopes(num_heads: int, shard: tuple[int, int] | None = None) -> torch.Tensor:
    """The protocol function: (H,) (the shard's (h1 - h0,)), in the default dtype."""
    return torch.tensor(shard_slopes(num_heads, shard), dtype=torch.float64).to(torch.get_default_dtype())


def alibi_bias(num_heads: int, query_len: int, key_len: int, shard: tuple[int, int] | None = None) -> torch.Tensor:
    """The protocol function: (H, Lq, Lk) (the shard's heads only), float64 math returned in the default dtype."""
    return alibi_math(num_heads, query_len, key_len, shard=shard).to(torch.get_default_dtype())


class AlibiPositionalBias(nn.Module):
    """The protocol's cached form: ``forward(query_len, key_len)`` is ``alibi_bias(num_heads,
    query_len, key_len)`` (no cache here: every call is the function)."""

    def __init__(self, num_heads: int):
        super().__init__()
        self.num_heads = int(num_heads)
        # a buffer, so that .to(device) moves where the bias is made (not saved: it is a formula)
        self.register_buffer("slopes", torch.tensor(get_slopes(self.num_heads), dtype=torch.float64),
                             persistent=False)

    def forward(self, query_len: int, key_len: int) -> torch.Tensor:
        """(H, Lq, Lk) on the module's device, in the default dtype."""
        dist = alibi_distance(query_len, key_len).to(self.slopes.device)
        return (-self.slopes[:, None, None] * dist[None]).to(torch.get_default_dtype())
