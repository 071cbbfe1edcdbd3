"""T5 relative position buckets (Mesh TensorFlow's ``_relative_position_bucket``).

    relative_position = key position - query position   (any integer shape)
    output: the same shape, int64 buckets in [0, num_buckets)

bidirectional: half the buckets (nb = num_buckets // 2) for keys at or before the
    query (relative_position <= 0), the other half, offset by nb, for keys after it;
causal (bidirectional=False): every key after the query shares bucket 0, and
    the past uses all nb = num_buckets buckets.
Within a half, with n = |distance| and max_exact = nb // 2:
    n < max_exact:  bucket n                                   (exact)
    otherwise:      max_exact + floor(log(n / max_exact) / log(max_distance / max_exact)
                                      * (nb - max_exact)),     capped at nb - 1  (logarithmic)
so every distance >= max_distance shares the last bucket of its half.

Mesh TF and Hugging Face evaluate the logarithm in float32; this module uses
float64. ``log_position`` exposes the unfloored value so a comparison can see
where float32 rounding could land a distance on either side of a boundary.
"""
from __future__ import annotations

import math

import torch


def _halves(relative_position: torch.Tensor, bidirectional: bool, num_buckets: int):
    """(offset, n, nb): the half's bucket offset, the distance n >= 0, the half's size."""
    rp = relative_position.to(torch.int64)
    if bidirectional:
        nb = num_buckets // 2
        return (rp > 0).to(torch.int64) * nb, rp.abs(), nb
    return torch.zeros_like(rp), (-rp).clamp_min(0), num_buckets


def log_position(n: torch.Tensor, nb: int, max_distance: int) -> torch.Tensor:
    """max_exact + log(n / max_exact) / log(max_distance / max_exact) * (nb - max_exact), float64."""
    max_exact = nb // 2
    ratio = n.to(torch.float64).clamp_min(max_exact) / max_exact
    return max_exact + torch.log(ratio) / math.log(max_distance / max_exact) * (nb - max_exact)


def t5_relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True,
                                num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """The protocol function (HF ``T5Attention._relative_position_bucket``'s contract)."""
    offset, n, nb = _halves(relative_position, bidirectional, num_buckets)
    max_exact = nb // 2
    if max_exact < 1 or max_distance <= max_exact:
        raise ValueError(f"need num_buckets // {4 if bidirectional else 2} >= 1 and max_distance > "
                         f"max_exact; got num_buckets={num_buckets}, max_distance={max_distance}")
    large = log_position(n, nb, max_distance).floor().to(torch.int64).clamp_max(nb - 1)
    return offset + torch.where(n < max_exact, n, large)
