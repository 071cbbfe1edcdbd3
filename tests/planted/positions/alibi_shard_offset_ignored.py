"""Planted bug: a rank's ALiBi bias takes the first heads' slopes, whatever heads it holds.

Real pattern: the full model's slopes sliced as ``slopes[:num_local_heads]`` (the rank's offset
``rank * num_local_heads`` forgotten): rank 0 is right, every other rank repeats rank 0's slopes.
The slopes function is right here; only the bias is built wrong. Caught by: alibi_shard.bias.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Alibi  # noqa: E402


class Planted(Alibi):
    def alibi_slopes(self, num_heads, shard=None):
        slopes = self.get_slopes(num_heads)
        return torch.tensor(slopes if shard is None else slopes[shard[0]:shard[1]], dtype=torch.float32)

    def alibi_bias(self, num_heads, query_len, key_len, shard=None):
        slopes = torch.tensor(self.get_slopes(num_heads), dtype=torch.float32)
        if shard is not None:
            slopes = slopes[: shard[1] - shard[0]]  # BUG: the rank's offset shard[0] forgotten
        return -slopes[:, None, None] * self.distance(query_len, key_len)[None]


_planted = Planted()
alibi_slopes = _planted.alibi_slopes
alibi_bias = _planted.alibi_bias
