"""Planted bug: the causal path ignores an explicit ``scale`` (it uses 1/sqrt(E)).

Real pattern: a fast path for ``is_causal=True`` that calls the causal kernel without forwarding
``scale``. An explicit scale without is_causal is right (attention.scale passes), is_causal with
the default scale is right (attention.causal passes). Caught by: options_together.sdpa.
Message: is_causal
Message: scale
Alone: test_attention.py -k test_scale
Alone: test_attention_masks.py -k test_causal
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "attention"))
from _base import Attention  # noqa: E402


class Planted(Attention):
    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                     scale=None, enable_gqa=False):
        if is_causal:
            scale = None  # BUG: the causal fast path drops the scale
        return super().scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                    enable_gqa)


scaled_dot_product_attention = Planted().scaled_dot_product_attention
