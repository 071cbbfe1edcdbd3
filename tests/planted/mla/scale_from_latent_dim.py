"""Planted bug: the default softmax scale taken from the value head dim (head_dim_v ** -0.5, the
latent's 512 in DeepSeek) instead of q's full head dim D = Dc + Dr (576).

Real pattern: a kernel ported from a standard attention kernel that derives the scale from the head dim
it knows as "the" head dim, which in MLA is the value/latent width.
Caught by: mla.agreement
Message: head_dim_v^-0.5
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def default_scale(self, D, head_dim_v):
        return head_dim_v ** -0.5  # BUG: the latent's dims, not D = Dc + Dr


mla_decode = Planted().mla_decode
