"""Configurations for the stateful position modules: a module built once, then a sequence of calls.

The state machine in ``suites/test_rope_module.py`` draws the sequence one call at a time; the
configuration it reports is the whole sequence, as plain numbers and names, so a shrunk
counterexample is a short list of calls that ``python -m harness repro`` replays on a fresh
module, call by call.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.configs import DTYPES, Config, register

#: every position a call uses is below this: integers up to 256 are exact in every dtype
#: (bfloat16's 8-bit significand), so a library that builds positions in the input's dtype is
#: not failed here for that (the precision of large positions is rope.long_context's
#: property); cache bugs show at any size
MAX_POSITION = 256


@register
@dataclass(frozen=True)
class RopeCallsConfig(Config):
    """``RotaryEmbedding(D, base)`` built once, then called once per entry of ``calls``:
    ``(L, offset, dtype, device)`` gives ``forward(x, offset)`` with x (batch, heads, L, D) of
    that dtype on that device (the module moved there first when the device changes), x drawn
    from ``seed`` and the call's index."""

    D: int
    base: float
    batch: int
    heads: int
    seed: int
    calls: tuple[tuple[int, int, str, str], ...] = ()

    def __post_init__(self):  # JSON gives lists: calls stay hashable tuples
        object.__setattr__(self, "calls", tuple(tuple(c) for c in self.calls))

    def then(self, L: int, offset: int, dtype: str, device: str) -> "RopeCallsConfig":
        """This sequence with one more call."""
        return RopeCallsConfig(self.D, self.base, self.batch, self.heads, self.seed,
                               self.calls + ((int(L), int(offset), str(dtype), str(device)),))

    def x(self, index: int) -> torch.Tensor:
        """The input of call ``index``: (batch, heads, L, D) in its dtype on its device."""
        L, _, dtype, device = self.calls[index]
        g = self.generator(salt=index)
        return torch.randn(self.batch, self.heads, L, self.D, generator=g).to(DTYPES[dtype]).to(device)

    def positions(self, index: int) -> torch.Tensor:
        """offset .. offset + L - 1 of call ``index``: (L,) int64 on the CPU."""
        L, offset = self.calls[index][:2]
        return torch.arange(L) + offset

    def describe(self, index: int) -> str:
        L, offset, dtype, device = self.calls[index]
        return f"call {index + 1} of {len(self.calls)}: forward(x ({self.batch}, {self.heads}, {L}, {self.D}) " \
               f"{dtype} on {device}, offset={offset})"
