"""Planted bug: for GQA groups of 4 or more query heads per KV head, query head h reads KV head
h % Hkv (tiled) instead of h // (Hq / Hkv); groups of 2 and 3 use the right mapping.

Real pattern: a kernel with a separate "large group" launch path (packing several query heads
per program) whose head index uses ``off_h % H_KV``. Caught by: attention.gqa.
Message: read KV head
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def expand_kv(self, t, group: int):
        if group >= 4:
            return t.repeat(*[1] * (t.dim() - 3), group, 1, 1)  # BUG: h % Hkv
        return super().expand_kv(t, group)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
