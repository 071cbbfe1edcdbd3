"""Rotary position embedding in Triton with interleaved pairs (2i, 2i + 1) (GPT-J, Meta llama).

The kernel and shapes are ``reference.triton.rope``'s; this module is its other pairing
(``rope_layout = interleaved``), so each pairing runs through the suites as its own target.
"""
from __future__ import annotations

from harness.reference.triton.rope import RotaryEmbedding as _RotateHalf
from harness.reference.triton.rope import rope

HARNESS_TILES = (64,)
HARNESS_CONVENTIONS = {"rope_layout": "interleaved"}


def apply_rotary_embedding(x, positions, base=10000.0):
    """x (B, H, L, D) at positions (L,) or (B, L), interleaved pairs; output like x."""
    return rope(x, positions, base, interleaved=True)


class RotaryEmbedding(_RotateHalf):
    """The stateful form, interleaved pairs."""

    interleaved = True
