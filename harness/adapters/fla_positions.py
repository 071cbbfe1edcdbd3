"""flash-linear-attention's Triton rotary embedding (``fla.modules.rotary``) as ``apply_rotary_embedding``
and the stateful ``RotaryEmbedding``.

    --impl harness.adapters.fla_positions     (pip install --no-deps fla-core==0.6.0 einops==0.8.2 triton==3.9.0)

- ``RotaryEmbedding(dim, base)``: fla's ``RotaryEmbedding(dim, base, interleaved=False)``, built once,
  called as its models call it: ``forward(q, k, seqlen_offset=offset)`` on the (B, L, H, D) layout,
  its cos/sin cache grown with the length, rebuilt on a new dtype or device (the call-sequence
  properties check that state). The protocol's x (B, H, L, D) is handed over transposed; k is one
  head of x (fla rotates q and k together).
- ``apply_rotary_embedding(x, positions, base)``: fla's ``rotary_embedding`` kernel on tables whose
  rows are the given positions (cos/sin computed here in float64, passed in x's dtype as fla's own
  module passes its cache, offset 0: the
  kernel reads row t for token t), one call per batch row for per-batch positions.

Rotate-half pairing (``interleaved=False``, fla's default): the named ``rope_layout: rotate_half``.
On a CPU the kernels run under Triton's interpreter (autotuned: ``harness.boundary.interpreter_fixes``).
"""
from __future__ import annotations

import torch
from fla.modules.rotary import RotaryEmbedding as _FlaRotary
from fla.modules.rotary import rotary_embedding
from torch import nn

try:
    from fla import __version__
except ImportError:  # pragma: no cover
    __version__ = "unknown"

HARNESS_CONVENTIONS = {"rope_layout": "rotate_half"}
HARNESS_UNSUPPORTED = {"float64"}  # its kernel rotates in float32


def apply_rotary_embedding(x, positions, base=10000.0):
    """x (B, H, L, D) at positions (L,) or (B, L): out like x."""
    D = x.shape[-1]
    theta = float(base) ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    pos = positions.to(torch.float64).cpu().reshape(-1, positions.shape[-1])  # (P, L)
    angles = pos[..., None] * theta  # (P, L, D/2)
    # in x's dtype, as fla's module passes its cache (the kernel asserts the dtypes match)
    cos, sin = angles.cos().to(x.dtype).to(x.device), angles.sin().to(x.dtype).to(x.device)
    xt = x.transpose(1, 2)  # (B, L, H, D), fla's layout
    if pos.shape[0] == 1:
        out = rotary_embedding(xt, cos[0], sin[0], interleaved=False)
    else:
        out = torch.cat([rotary_embedding(xt[b:b + 1], cos[b], sin[b], interleaved=False) for b in range(x.shape[0])])
    return out.transpose(1, 2)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.inner = _FlaRotary(dim, base=base, interleaved=False)

    def forward(self, x, offset=0):
        q = x.transpose(1, 2)  # (B, L, H, D)
        q_out, _ = self.inner(q, q[:, :, :1].detach().clone(), seqlen_offset=int(offset))
        return q_out.transpose(1, 2)
