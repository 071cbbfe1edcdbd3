"""Planted bug: for a (Lq, Lk) input the relative positions are recomputed from the shape
as arange(Lk) - arange(Lq), ignoring the values: queries are assumed to start at position 0.

Real pattern: ``compute_bias(query_length, key_length)`` without the offset of the cached keys
during incremental decoding (HF's T5Attention.compute_bias takes ``past_seen_tokens`` for it).
Caught by: t5_bucket.relative_only (queries at an offset).
Message: must depend only on key - query
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import T5Buckets  # noqa: E402


class Planted(T5Buckets):
    def relative(self, relative_position):
        if relative_position.dim() == 2:  # BUG: values ignored, queries assumed at 0
            Lq, Lk = relative_position.shape
            return torch.arange(Lk)[None, :] - torch.arange(Lq)[:, None]
        return relative_position


t5_relative_position_bucket = Planted().t5_relative_position_bucket
