"""x-transformers' ``RelativePositionBias`` (the T5 bias) of a side-by-side release, as the protocol's
``t5_relative_position_bias``; the thin targets are ``xtransformers_1_0_1_t5_bias`` (queries aligned
to the START of the keys when Lq != Lk: the bug) and ``xtransformers_1_0_2_t5_bias`` (the fix).

    pip install --target /tmp/libs/xt-1.0.1 --no-deps x-transformers==1.0.1    (and 1.0.2)

The release's own ``RelativePositionBias`` class (read from its x_transformers.py by
``releases.load_definitions``: the package's ``__init__`` imports entmax) is built with
``scale=1`` (x-transformers multiplies the bias by its attention's scale; the protocol's bias is
the table's entries), ``causal = not bidirectional``, its ``relative_attention_bias`` weight set
to the table, and called on zero scores of shape (1, H, Lq, Lk): it returns scores + bias.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from harness.adapters.releases import import_needed, load_definitions, require


def bias_function(version: str):
    """``t5_relative_position_bias`` backed by x-transformers ``version``'s class."""
    path = require(f"xt-{version}", "x-transformers", version, "x_transformers/x_transformers.py")
    rearrange = import_needed("einops", f"x-transformers {version}'s RelativePositionBias").rearrange
    ns = load_definitions(path, ("RelativePositionBias",),
                          {"torch": torch, "nn": nn, "F": F, "math": math, "rearrange": rearrange})
    cls = ns["RelativePositionBias"]

    def t5_relative_position_bias(table, query_len, key_len, bidirectional=True, num_buckets=32,
                                  max_distance=128):
        """(H, Lq, Lk) from a (num_buckets, H) table."""
        module = cls(scale=1, causal=not bidirectional, num_buckets=num_buckets, max_distance=max_distance,
                     heads=table.shape[1]).to(table.device, table.dtype)
        with torch.no_grad():
            module.relative_attention_bias.weight.copy_(table)
            dots = torch.zeros(1, table.shape[1], query_len, key_len, dtype=table.dtype, device=table.device)
            return module(dots)[0]

    return t5_relative_position_bias
