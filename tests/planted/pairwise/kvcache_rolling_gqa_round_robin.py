"""Planted bug: with a window, query head h reads KV head h % Hkv (round-robin), not h // (Hq / Hkv).

Real pattern: the sliding-window path is a separate kernel whose head mapping was written anew
(``repeat`` instead of ``repeat_interleave``). GQA without a window is right, a window without
GQA (or with MQA, where both maps agree) is right. Caught by: options_together.kvcache.
Message: window 5
Alone: test_kvcache.py -k test_decode
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kvcache"))
from _base import KVCache  # noqa: E402


class Planted(KVCache):
    windowed = False

    def attention_with_kvcache(self, q, k_cache, v_cache, *args, window=None, **kw):
        self.windowed = window is not None
        return super().attention_with_kvcache(q, k_cache, v_cache, *args, window=window, **kw)

    def attend(self, q, keys, vals, visible, scale, softcap=None, sinks=None):
        g = q.shape[-3] // keys.shape[-3]
        if self.windowed and g > 1:
            keys, vals = keys.repeat(g, 1, 1), vals.repeat(g, 1, 1)  # BUG: heads dealt round-robin
        return super().attend(q, keys, vals, visible, scale, softcap, sinks)


attention_with_kvcache = Planted().attention_with_kvcache
