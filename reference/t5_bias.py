"""T5 relative position bias: the learned table read at each (query, key) pair's bucket.

    table: (num_buckets, H)  -- nn.Embedding(num_buckets, H).weight, one column per head
    output: (H, Lq, Lk), Lq <= Lk, in the table's dtype

Queries are aligned to the END of the keys (KV-cache decoding: the Lq new queries are the last
Lq positions): query i sits at position p_i = Lk - Lq + i, key j at position j, and

    bias[h, i, j] = table[t5_relative_position_bucket(j - p_i, bidirectional, num_buckets,
                                                      max_distance), h]

(the bucket of key - query, Mesh TensorFlow / Hugging Face T5's sign). A lookup: no arithmetic,
so the output is exact in any dtype.
"""
from __future__ import annotations

import torch
from torch import nn

from harness.reference.t5_bucket import t5_relative_position_bucket


def relative_positions(query_len: int, key_len: int, device=None) -> torch.Tensor:
    """(Lq, Lk) int64: key position j minus query position p_i = Lk - Lq + i."""
    q = torch.arange(query_len, device=device) + (key_len - query_len)
    return torch.arange(key_len, device=device)[None, :] - q[:, None]


def t5_relative_position_bias(table: torch.Tensor, query_len: int, key_len: int, bidirectional: bool = True,
                              num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """The protocol function: (H, Lq, Lk) from a (num_buckets, H) table."""
    if table.dim() != 2 or table.shape[0] != num_buckets:
        raise ValueError(f"table must be (num_buckets={num_buckets}, H), got {tuple(table.shape)}")
    if not 0 < query_len <= key_len:
        raise ValueError(f"need 0 < query_len <= key_len, got {query_len}, {key_len}")
    buckets = t5_relative_position_bucket(relative_positions(query_len, key_len, table.device),
                                          bidirectional, num_buckets, max_distance)  # (Lq, Lk)
    return table[buckets].permute(2, 0, 1)  # (Lq, Lk, H) -> (H, Lq, Lk)


class T5RelativePositionBias(nn.Module):
    """The protocol's module form: a learned table ``relative_attention_bias`` (nn.Embedding
    (num_buckets, H)) and ``forward(query_len, key_len)`` -> (H, Lq, Lk), the function above on its
    weight (no cache here)."""

    def __init__(self, num_heads: int, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.bidirectional, self.num_buckets, self.max_distance = bool(bidirectional), int(num_buckets), int(max_distance)
        self.relative_attention_bias = nn.Embedding(self.num_buckets, int(num_heads))

    def forward(self, query_len: int, key_len: int) -> torch.Tensor:
        return t5_relative_position_bias(self.relative_attention_bias.weight, query_len, key_len, self.bidirectional,
                                         self.num_buckets, self.max_distance)
