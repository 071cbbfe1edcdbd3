"""Planted pair, backend 2 of 2 (with ``eager.py``): the library's fused path.

Convention that differs: causal masks bottom-right (FlashAttention >= 2.1), declared, so
``attention.causal`` passes it alone as ``convention:bottom_right``; eager.py is top-left.

Planted bug: RoPE's default base is 500000 (copied from a Llama 3 config into the kernel's
signature), not the protocol's 10000. Alone every rope property passes: they all pass ``base``
explicitly, as a model with a configured base does. A model that leaves the default gets other
angles than on the eager path: the differential check (called as a model calls it, defaults
left to the target) catches it.
Real pattern: a backend whose default differs from its sibling's (the brief's "different scale
default"; e.g. RoPE kernels whose ``base``/``theta`` default is 10000 in one path and the model
config's value in another).
Caught by: the consistency section (differential apply_rotary_embedding), not by any one-target property.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _backends import ROPE, sdpa_bottom_right  # noqa: E402

HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}

scaled_dot_product_attention = sdpa_bottom_right


def apply_rotary_embedding(x, positions, base=500000.0):  # BUG: the default base
    return ROPE.apply_rotary_embedding(x, positions, base)
