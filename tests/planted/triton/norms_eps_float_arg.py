"""Planted bug: eps handed to the norm kernel as a Python float (the kernel reads it as an argument).

Real pattern (found by the first CUDA run of the reference kernels): compiled Triton types a float
argument fp32, so a float64 norm adds fp32(eps) -- about 4e-9 off where the mean square is near eps.
The bare interpreter passes the float unrounded and hid it; the harness's interpreter rounds it as
compiled code does (``harness.boundary.interpret.compiled_scalars``).
Caught by: layernorm.eps_honoured (and rmsnorm.eps, in float64).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("norms", "torch.tensor([eps], dtype=acc_t, device=x.device)", "eps",
              also=(("eps = tl.load(EPS)", "eps = EPS"),)),
       globals(), "RMSNorm", "LayerNorm")
