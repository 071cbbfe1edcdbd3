"""Planted bug: dropout draws its mask from a private generator seeded once at import, so
``torch.manual_seed`` does not make a training run reproducible (and another seed gives the same
masks).

Real pattern: a kernel library keeping its own Philox seed/offset state instead of reading torch's
RNG (a checkpointed-and-resumed run then differs from an uninterrupted one).
Caught by: attention.dropout_seeded.
Message: torch.manual_seed
Message: matches no known convention
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

_RNG = torch.Generator().manual_seed(1234)  # BUG: not torch's global RNG


class Planted(Attention):
    def dropout(self, weights, dropout_p: float):
        if dropout_p > 0.0:
            keep = torch.rand(weights.shape, generator=_RNG) >= dropout_p
            return weights * keep.to(weights.device) / (1 - dropout_p)
        return weights


scaled_dot_product_attention = Planted().scaled_dot_product_attention
