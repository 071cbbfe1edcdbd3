"""liger-kernel's Triton RoPE (``LigerRopeFunction``) under the harness protocol name.

    --impl harness.adapters.liger_positions     (pip install --no-deps liger-kernel==0.8.5 triton==3.9.0)

- ``apply_rotary_embedding``: ``liger_kernel.ops.rope.LigerRopeFunction`` (forward and its
  Triton backward), as Hugging Face's Llama calls it: q (B, H, L, D), cos/sin (1 or B, L, D)
  with each frequency twice (``cat(freqs, freqs)``): rotate-half pairs (i, i + D/2), the named
  convention ``rope_layout = rotate_half``. The tables are built here in float64 and passed in
  float32 (Hugging Face passes them in the activations' dtype; float32 is the more accurate of
  the two). liger rotates q and k together; the adapter passes x as q and a one-head copy as k.
  On a CPU the harness runs the kernel under Triton's interpreter. liger rotates q IN PLACE
  when q's (B, L, H, D) view is contiguous (H = 1: the transpose is then free), and its backward
  writes into the incoming gradient the same way (the harness's in-place check caught both on
  the adapter's first run); Hugging Face's callers never reuse either, so the adapter gives it a
  copy of x and a fresh gradient.
- A bug of liger 0.8.5 this adapter shows (found by ``harness sweep``; ``tests/test_planted_triton.py``):
  on a contiguous (B, H, 1, D) q (a decode step) the rows are rotated wrong (``rope.agreement`` at
  L = 1). Cause, pinned in its ``rope_forward``: the kernel starts row ``pid = b * L + l`` at
  ``pid * q.stride(1)`` of ``q.transpose(1, 2)`` (B, L, H, D). At L = 1 that size-1 dim keeps the
  stride D of q's L dim, PyTorch counts the view contiguous, so ``.contiguous()`` copies nothing,
  and program b starts D elements on instead of H * D (batch item 0's later heads are rotated
  twice, the later items read the wrong heads); ``rope_backward`` does the same. Hugging Face's
  decode step passes q as a view of its (B, 1, H, D) projection (row stride H * D), which is
  right. 0.8.5 is the newest release on PyPI (2026-12-03): no release to hold as the fixed one.

liger-kernel 0.8.5's LayerNorm and RMSNorm once stopped under the interpreter with "'float' object
has no attribute 'to'" (a Python float eps, where compiled code has a typed scalar) and then on
libdevice's ``rsqrt`` (a stub returning None): both on the CPU's side, fixed in the interpreted
target's process (``harness.boundary.interpret.compiled_scalars``, ``harness.boundary.interpreter_fixes``); they are
``harness.adapters.liger_norms`` now.
"""
from __future__ import annotations

import torch
from liger_kernel.ops.rope import LigerRopeFunction

HARNESS_CONVENTIONS = {"rope_layout": "rotate_half"}
HARNESS_UNSUPPORTED = {"float64"}  # the kernel computes in the tensors' dtype with float32 tables


def _tables(positions: torch.Tensor, dim: int, base: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (P, L, D) float32, P = 1 for positions (L,), B for (B, L)."""
    theta = float(base) ** (-2.0 * torch.arange(dim // 2, dtype=torch.float64) / dim)
    pos = positions.to(torch.float64).cpu()
    angles = pos.reshape(-1, pos.shape[-1])[..., None] * theta  # (P, L, D/2)
    emb = torch.cat([angles, angles], dim=-1)  # Hugging Face's layout: each frequency twice
    return emb.cos().float().to(device), emb.sin().float().to(device)


def apply_rotary_embedding(x, positions, base=10000.0):
    """x (B, H, L, D) at positions (L,) or (B, L), through liger's kernel; output like x."""
    cos, sin = _tables(positions, x.shape[-1], base, x.device)
    k = x[:, :1].detach().clone()  # liger rotates q and k together; one head of k is enough
    q_out, _ = LigerRopeFunction.apply(x.clone(), k, cos, sin)  # a copy: it may rotate q in place
    return q_out * 1.0  # a fresh gradient for its backward, which may write into it in place
