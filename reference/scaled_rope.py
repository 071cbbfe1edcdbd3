"""The stateful scaled rotary module (context extension), float64: the protocol's ``ScaledRotaryEmbedding``.

    ScaledRotaryEmbedding(dim, base=10000.0, scaling=None)     built once, called again and again
    forward(x (B, H, L, D), positions (L,) integers) -> (B, H, L, D), x's dtype

``dim`` = D, the head dim; ``scaling`` the dict of ``rope_frequencies`` (``reference/rope_scaling.py``:
Hugging Face's ``rope_parameters`` vocabulary, ``partial_rotary_factor`` included). A call's sequence
length is ``seq_len = max(positions) + 1`` (as Hugging Face's ``dynamic_rope_update`` reads it from
``position_ids``: a decoding step at position 5000 is a call of length 5001), and

    inv_freq, a = rope_frequencies(dim, base, scaling, seq_len)        R = 2 * len(inv_freq)
    out[..., :R]  = a * rotation of x[..., :R] by the angles positions[l] * inv_freq  (interleaved pairs)
    out[..., R:]  = x[..., R:]                                                         (passed through)

so within one call <out_q(m), out_k(n)> = a^2 <R((m - n) inv_freq) q, k> depends on m - n only,
and the rotated dims' norm is multiplied by ``a`` exactly. Which rules have state: ``dynamic``
(the base follows the length) and ``longrope`` (short or long factors). The reference has none: every
call is the formula at that call's own length (the ``dynamic_update`` convention ``per_call``).
Hugging Face's module grows its base with the longest length seen and goes back to the original only
when a call is shorter than ``original_max_position_embeddings`` (``grow_until_reset``):
``dynamic_length`` gives the length whose base each call uses under either.
"""
from __future__ import annotations

import torch
from torch import nn

from harness.reference.rope import rotate
from harness.reference.rope_scaling import RULES, rope_frequencies

#: the ``dynamic_update`` conventions ``dynamic_length`` knows
DYNAMIC_UPDATES = ("per_call", "grow_until_reset")


def dynamic_length(lengths: list[int], orig: int, update: str = "per_call") -> int:
    """The length whose NTK base the last of ``lengths`` (each call's max position + 1, in order, on
    one instance) uses: ``per_call`` its own (at least ``orig``); ``grow_until_reset`` the longest
    since the last call shorter than ``orig`` (Hugging Face: grow past the cached length, reset
    below the original one)."""
    if update == "per_call":
        return max(lengths[-1], orig)
    if update != "grow_until_reset":
        raise ValueError(f"unknown dynamic_update {update!r}; known: {DYNAMIC_UPDATES}")
    cached = orig
    for n in lengths:
        if n > cached:
            cached = n
        if n < orig:
            cached = orig
    return cached


class ScaledRotaryEmbedding(nn.Module):
    """The protocol's scaled rotary module: forward(x (B, H, L, D), positions (L,)) rotates the first
    R dims of x at ``positions`` with the frequencies and attention factor of ``scaling`` at
    seq_len = max(positions) + 1 and passes the rest through (float64 math, x's dtype out)."""

    def __init__(self, dim: int, base: float = 10000.0, scaling: dict | None = None):
        super().__init__()
        rule = (scaling or {}).get("rope_type", "default")
        if rule not in RULES:
            raise ValueError(f"unknown rope_type {rule!r}: one of {RULES}")
        self.dim, self.base, self.scaling = int(dim), float(base), dict(scaling) if scaling else None

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"x has head dim {x.shape[-1]}, the module was built for {self.dim}")
        if positions.dim() != 1 or positions.shape[0] != x.shape[-2]:
            raise ValueError(f"positions must be (L,) with L = {x.shape[-2]}, got {tuple(positions.shape)}")
        inv, factor = rope_frequencies(self.dim, self.base, self.scaling, int(positions.max()) + 1)
        angles = positions.to(torch.float64).cpu()[:, None] * inv  # (L, R/2)
        return rotate(x.cpu(), angles, factor).to(device=x.device, dtype=x.dtype)
