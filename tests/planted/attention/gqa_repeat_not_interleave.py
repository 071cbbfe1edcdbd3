"""Planted bug: GQA expands the KV heads with ``repeat`` (tiling) instead of
``repeat_interleave``, so query head h reads KV head h % Hkv instead of h // (Hq / Hkv).

Real pattern: ``k.repeat(1, group, 1, 1)`` / ``k.expand`` on the wrong axis order when
porting grouped-query attention (Llama-2-70B, Mistral); Hugging Face's ``repeat_kv``
exists to get this order right. Caught by: attention.gqa.
Message: repeat_interleave
Message: read KV head
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def expand_kv(self, t, group):
        reps = [1] * t.dim()
        reps[-3] = group
        return t.repeat(*reps)  # BUG: tiles the heads; should be t.repeat_interleave(group, dim=-3)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
