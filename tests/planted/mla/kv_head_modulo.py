"""Planted bug: with several latent heads, query head h reads latent head h % Hkv instead of
h // (Hq / Hkv) (GQA's grouping): right for one latent head, as DeepSeek and FlashMLA have.

Real pattern: the interleaved head mapping of some GQA kernels (repeat instead of repeat_interleave).
Caught by: mla.kv_heads
Message: latent heads
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402


class Planted(MLA):
    def kv_head(self, h, Hq, Hkv):
        return h % Hkv  # BUG


mla_decode = Planted().mla_decode
