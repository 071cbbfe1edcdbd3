"""Planted bug: ``mla_decode`` computes its default scale once, from the first call's q, and keeps it:
a later call with another head dim (another model, or DeepSeek's MTP layer beside the main one) uses the
first call's scale. Each call in a fresh process is right.

Real pattern: a kernel wrapper that caches launch parameters (scale, tile sizes) per process instead of
per shape.
Caught by: history.mla_decode (the first call again after calls of other sizes).
Message: differs after the calls before it on the same target
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def default_scale(self, D, head_dim_v):
        if not hasattr(self, "scale"):
            self.scale = D ** -0.5  # BUG: kept for every later call
        return self.scale


mla_decode = Planted().mla_decode
