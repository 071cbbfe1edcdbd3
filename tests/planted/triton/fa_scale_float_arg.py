"""Planted bug: the softmax scale handed to the attention kernels as a Python float.

Real pattern (found by the first CUDA run of the reference kernels): compiled Triton types a float
argument fp32, so float64 attention is scaled by fp32(scale), about 3e-8 off: far outside float64's
tolerance. The bare interpreter passes the float unrounded and hid it; the harness's interpreter
rounds it as compiled code does (``harness.boundary.interpret.compiled_scalars``).
Caught by: attention.scale (its float64 example runs first).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("flash_attention", "scale = tl.load(SCALE)", "scale = SCALE", count=3,
              also=(("args = (scalar(scale, q), L,", "args = (scale, L,"),)),
       globals(), "scaled_dot_product_attention", "sliding_window_attention")
