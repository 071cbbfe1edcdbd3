"""Planted bug: the RMSNorm backward leaves out the final rstd factor of dx.

Real pattern (the edit: ``(rstd * inner)`` stored as ``inner``): ``dx = g - xhat * mean(g * xhat)`` without ``* rstd``: right only where the
mean square is 1 (unit-variance inputs hide it; the suites' scaled inputs do not).
Caught by: norm_grad.rmsnorm.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mutant import export, mutant  # noqa: E402

export(mutant("norms", "(rstd[:, None] * inner).to(DX.dtype.element_ty)",
              "inner.to(DX.dtype.element_ty)"),
       globals(), "RMSNorm")
