"""Planted bug: query head h reads KV head h % Hkv.

Real pattern: K/V heads repeated with ``repeat`` (tiled) where ``repeat_interleave`` belongs
(grouped heads are contiguous). Caught by: varlen.gqa.
Message: Hq=
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def kv_head(self, h, group, hkv):
        return h % hkv  # BUG: round-robin, not h // group


attention_varlen = Planted().attention_varlen
