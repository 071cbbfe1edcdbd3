"""Planted pair, backend 1 of 2 (with ``fused.py``): the library's eager path, correct alone.

torch SDPA (causal top-left, the protocol default) and rotate-half RoPE with the protocol's
default base 10000. Held to ``fused.py`` it disagrees on ``attention.causal`` (a convention) and
on RoPE outputs called with the default base (fused.py's bug).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _backends import ROPE, sdpa_top_left  # noqa: E402

scaled_dot_product_attention = sdpa_top_left


def apply_rotary_embedding(x, positions, base=10000.0):
    return ROPE.apply_rotary_embedding(x, positions, base)
