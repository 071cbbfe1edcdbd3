"""Planted bug: the online softmax does not rescale the accumulator when the row max grows.

Real pattern: ``acc += tl.dot(p, v)`` without ``acc *= alpha`` (the running sum l is rescaled,
the output accumulator is not): right while the first key block holds each row's maximum.
Caught by: attention.agreement (more than one key block of 64).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, ACC, DOT)",
              "acc = acc + _dot(p.to(v.dtype), v, ACC, DOT)  # BUG: no rescale"),
       globals(), "scaled_dot_product_attention")
