"""Planted bug: a kernel written for float16, bfloat16 added later: the forward reads a 16-bit input
through a float16 pointer, so bfloat16 bits are taken for float16 ones (float16 inputs are right).

Real pattern: a bfloat16-only bug in the kernel (declares bfloat16 only, so every check is one). Caught on a CPU by
rmsnorm.large_values (and every bfloat16 agreement) under the harness's interpreter fixes. Where a
CPU reports bfloat16 unsupported (Triton's interpreter wrong in bfloat16 and not fixed:
``$HARNESS_INTERPRETER_FIXES=off``, or a triton the fixes do not fit), the CPU says nothing about
it: the GPU run (notes/GPU_RUN.md, compiled) is where it is caught.
Caught by: rmsnorm.large_values (bfloat16, under the interpreter fixes).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

FORWARD_LOAD = "x = tl.load(X + at, mask=inside, other=0.0).to(ACC)\n    mean = tl.zeros([BLOCK_M], ACC)"
AS_FP16 = "(X.to(tl.pointer_type(tl.float16)) if X.dtype.element_ty == tl.bfloat16 else X)"

export(mutant("norms", FORWARD_LOAD, FORWARD_LOAD.replace("tl.load(X + at", f"tl.load({AS_FP16} + at", 1)),
       globals(), "RMSNorm")
HARNESS_DTYPES = ("bfloat16",)
