"""Planted bug: the flash-attention forward drops the last key tile's boundary mask.

Real pattern: ``mask=offs_n < S`` left off the score mask of a tiled kernel; padded keys past S
(loaded as zeros) score 0 and take softmax weight whenever S is not a multiple of BLOCK_N.
Caught by: attention.agreement (S = 129 is past the first 64-key tile).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "keep = (offs_m[:, None] < L) & (offs_n[None, :] < S)",
              "keep = (offs_m[:, None] < L) & (offs_n[None, :] >= 0)  # BUG: no key bound"),
       globals(), "scaled_dot_product_attention")
