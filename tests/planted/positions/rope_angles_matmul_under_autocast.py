"""Planted bug: the angles are built with a matmul, ``inv_freq[:, None].float() @
positions[None, :].float()``, which is right in float32 -- and which ``torch.autocast`` runs in
bfloat16, so under mixed-precision training the rotation at position 60000 is noise.

Real pattern: Hugging Face transformers 4.38.1, ``LlamaRotaryEmbedding.forward`` (the matmul form
of the angles), fixed in 4.38.2 (PR 29285) by disabling autocast around it.
Caught by: rope.autocast.
Message: under torch.autocast
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Rope  # noqa: E402


class Planted(Rope):
    def angles(self, positions, inv_freq, dtype):
        # (D/2, 1) @ (1, L) -> (D/2, L): a matmul, so autocast lowers it (BUG)
        pos = positions.to(dtype)
        if pos.dim() == 1:
            return (inv_freq[:, None].to(dtype) @ pos[None, :]).transpose(-1, -2)
        return (inv_freq[None, :, None].to(dtype) @ pos[:, None, :]).transpose(-1, -2)


apply_rotary_embedding = Planted().apply_rotary_embedding
