"""Planted bug: a tensor-parallel rank computes its ALiBi slopes from its own head count.

Real pattern: ``get_slopes(num_attention_heads_per_partition)`` (or ``self.num_heads`` after the
attention layer divided the heads by the world size) where the full model's ``get_slopes(total_heads)``
sliced to the rank's heads belongs: every rank then carries the slopes of a smaller model, the same
ones on each rank. Caught by: alibi_shard.slopes, alibi_shard.bias.
Message: the slopes of a model with the shard's head count
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    def shard_slopes(self, num_heads, shard):
        if shard is None:
            return self.get_slopes(num_heads)
        h0, h1 = shard
        return self.get_slopes(h1 - h0)  # BUG: the shard's head count, not heads h0..h1-1 of num_heads

    def alibi_slopes(self, num_heads, shard=None):
        return torch.tensor(self.shard_slopes(num_heads, shard), dtype=torch.float32)

    def alibi_bias(self, num_heads, query_len, key_len, shard=None):
        slopes = torch.tensor(self.shard_slopes(num_heads, shard), dtype=torch.float32)
        return -slopes[:, None, None] * self.distance(query_len, key_len)[None]


_planted = Planted()
alibi_slopes = _planted.alibi_slopes
alibi_bias = _planted.alibi_bias
