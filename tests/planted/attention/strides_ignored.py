"""Planted bug: the kernel reads q, k and v as if they were contiguous (it uses each tensor's
storage with contiguous strides), so a transposed (B, L, H, E) view, a slice of a fused QKV
projection or of wider rows is read wrongly; contiguous inputs are right.

Real pattern: a Triton/CUDA launch that passes ``q.data_ptr()`` and computes offsets from the
shape instead of passing ``q.stride()``. Caught by: attention.layouts.
Message: strides
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


def _as_contiguous_memory(t):
    if t.is_contiguous():
        return t
    flat = t.new_empty(0).set_(t.untyped_storage(), t.storage_offset(), (t.numel(),), (1,))
    if flat.numel() < t.numel():  # (stride-0 broadcasts: not enough memory to misread)
        return t
    return flat.view(t.shape)  # BUG: the memory read in contiguous order, strides ignored


class Planted(Attention):
    def to_compute(self, query, key, value):
        return super().to_compute(*(_as_contiguous_memory(t) for t in (query, key, value)))


scaled_dot_product_attention = Planted().scaled_dot_product_attention
