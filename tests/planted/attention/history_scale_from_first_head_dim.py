"""Planted bug: ``scaled_dot_product_attention`` works out its default softmax scale 1/sqrt(E) at
the first call and keeps it, so every later call with another head dim E is scaled for the first
call's E. Each call in a fresh process is right.

Real pattern: a kernel wrapper that sets ``self.softmax_scale = head_dim ** -0.5`` lazily on its
first forward (or a module-level ``_SCALE`` filled once) and is then shared by layers or models
with another head dim.
Caught by: history.scaled_dot_product_attention (a call with another E after the first).
Message: differs after the calls before it on the same target
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    first_scale = None

    def default_scale(self, query, key, value):
        if self.first_scale is None:
            self.first_scale = 1.0 / math.sqrt(query.shape[-1])
        return self.first_scale  # BUG: the first call's head dim


_planted = Planted()
scaled_dot_product_attention = _planted.scaled_dot_product_attention
