"""Planted bug: the default scale is computed from the value head dim Ev instead of
the query/key head dim E.

Real pattern: Multi-head Latent Attention ports (DeepSeek-V2: qk head dim 192,
v head dim 128) and kernels that read ``head_dim`` off the value/output tensor.
Caught by: attention.scale (needs Ev != E).
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def default_scale(self, query, key, value):
        return 1.0 / math.sqrt(value.shape[-1])  # BUG: should be query.shape[-1]


scaled_dot_product_attention = Planted().scaled_dot_product_attention
