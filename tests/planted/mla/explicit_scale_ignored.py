"""Planted bug: an explicit ``scale`` is ignored; the kernel always uses D^-0.5.

Real pattern: DeepSeek-V3 passes (d_nope + Dr)^-0.5 = 192^-0.5 (times YaRN's mscale squared), not the
absorbed 576^-0.5: a wrapper that drops softmax_scale gives the default, right only for callers that
never pass one.
Caught by: mla.absorbed
Message: the explicit scale
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def mla_decode(self, q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True):
        return super().mla_decode(q, kv_cache, cache_seqlens, head_dim_v, block_table, None, causal)  # BUG


mla_decode = Planted().mla_decode
