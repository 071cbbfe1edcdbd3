"""Planted bug: the flash-attention backward leaves out the rowsum(dO * O) term.

Real pattern: ``dS = P * dP`` instead of ``P * (dP - rowsum(dO * O))`` (the softmax Jacobian's
second term, FlashAttention's D): every gradient is off unless dO is orthogonal to O.
Caught by: attention_grad.agreement.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "delta = tl.sum(do.to(ACC) * o.to(ACC), 1)",
              "delta = tl.zeros([BLOCK_M], ACC)  # BUG: no rowsum(dO * O)", count=2),
       globals(), "scaled_dot_product_attention")
