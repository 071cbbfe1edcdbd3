"""Planted bug: the scores use only the latent part of q and the cache (q[..., :Dc] . c); the RoPE part
(q_pe . k_pe) is left out, so positions stop mattering.

Real pattern: a kernel that treats head_dim_v as the key head dim (both 512 in DeepSeek's latent)
and never reads the 64 trailing RoPE dims.
Caught by: mla.agreement
Message: the RoPE part
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def scores(self, q, k, scale, head_dim_v):
        return (q[:, :head_dim_v] @ k[:, :head_dim_v].T) * scale  # BUG: the dims past head_dim_v are dropped


mla_decode = Planted().mla_decode
