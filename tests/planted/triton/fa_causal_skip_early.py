"""Planted bug: causal block skipping stops one key block early (the diagonal block is skipped).

Real pattern: the causal loop bound ``hi = start_m + off`` instead of ``start_m + BLOCK_M + off``:
each query block never visits the key block on its diagonal.
Caught by: attention.causal (rows past the first tile).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "hi = tl.minimum(S, tl.maximum(start_m + BLOCK_M + off, 0))",
              "hi = tl.minimum(S, tl.maximum(start_m + off, 0))  # BUG: one block early"),
       globals(), "scaled_dot_product_attention")
