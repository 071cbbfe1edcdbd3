"""x-transformers' cached ``AlibiPositionalBias`` of a side-by-side release, as the protocol's
``AlibiPositionalBias``; the thin targets are ``xtransformers_1_22_16_alibi`` (the cache slices
``bias[..., :i, :j]``, the rows of the FIRST queries: the bug) and ``xtransformers_1_22_17_alibi``
(``[..., -i:, -j:]``, the fix).

    pip install --target /tmp/libs/xt-1.22.16 --no-deps x-transformers==1.22.16    (and 1.22.17)

The release's own class (read from its x_transformers.py by ``releases.load_definitions``, with the
helpers it calls; nothing else of the package is imported) is built as
``AlibiPositionalBias(heads=H, total_heads=H)`` and kept: ``forward(query_len, key_len)`` is its
``forward(i, j)``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from harness.adapters.releases import import_needed, load_definitions, require


def alibi_module(version: str):
    """The protocol's ``AlibiPositionalBias`` backed by x-transformers ``version``'s class."""
    path = require(f"xt-{version}", "x-transformers", version, "x_transformers/x_transformers.py")
    rearrange = import_needed("einops", f"x-transformers {version}'s AlibiPositionalBias").rearrange
    ns = load_definitions(path, ("exists", "pad_at_dim", "AlibiPositionalBias"),
                          {"torch": torch, "nn": nn, "F": F, "math": math, "rearrange": rearrange, "Tensor": Tensor})
    release = ns["AlibiPositionalBias"]

    class AlibiPositionalBias(release):
        def __init__(self, num_heads: int):
            super().__init__(num_heads, total_heads=num_heads)

    AlibiPositionalBias.__doc__ = f"x-transformers {version}'s AlibiPositionalBias(heads=H, total_heads=H)"
    return AlibiPositionalBias
