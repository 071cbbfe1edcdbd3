"""Control: a kernel that draws its dropout mask from the ``generator=`` its caller passes (and,
without one, from a default generator of its own), and declares that named convention.

Real pattern: kernels and samplers that take an explicit ``torch.Generator`` (as
``torch.rand``/``torch.bernoulli`` do) so that a data-parallel rank or a resumed run controls its
own stream. Must pass every dropout property, with ``dropout_rng`` reported as ``generator``.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

HARNESS_CONVENTIONS = {"dropout_rng": "generator"}
_DEFAULT = torch.Generator().manual_seed(99)


class GeneratorDropout(Attention):
    generator = None

    def dropout(self, weights, dropout_p: float):
        if dropout_p > 0.0:
            g = self.generator if self.generator is not None else _DEFAULT
            keep = torch.rand(weights.shape, generator=g, device=g.device) >= dropout_p
            return weights * keep.to(weights.device) / (1 - dropout_p)
        return weights

    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                     scale=None, enable_gqa=False, generator=None):
        self.generator = generator
        try:
            return super().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                        scale, enable_gqa)
        finally:
            self.generator = None


scaled_dot_product_attention = GeneratorDropout().scaled_dot_product_attention
