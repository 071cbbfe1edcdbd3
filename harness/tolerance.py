"""The one tolerance policy every numerical comparison in the harness uses.

As FlashAttention's and PyTorch's own tests do, the allowed error of an
implementation is a multiple of the error that the *same math done naively in
the input dtype* makes against a float64 reference, plus a small floor:

    err(actual)  = max |actual - ref64|
    err(naive)   = max |naive_in_dtype - ref64|
    allowed      = K * err(naive) + FLOOR[dtype] * max(1, max |ref64|)

NaN or inf where the reference is finite never passes. K and the floors live
here and nowhere else.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

#: multiple of the naive same-precision error an implementation may make
K = 4.0

#: the same multiple for gradients (dq, dk, dv; dx, dweight, dbias). FlashAttention's tests allow
#: 2x the naive PyTorch error for the output and 3x for dq/dk/dv: a backward chains more rounded
#: steps (dP = dO V^T, the row sums D = rowsum(dO * O), dS = P (dP - D), two more matmuls) and a
#: fused kernel recomputes P from saved row statistics instead of storing it. K above is twice
#: FlashAttention's forward multiple; K_GRAD = 6 keeps that margin over its backward one. The
#: naive yardstick is autograd through the same naive math in the input dtype.
K_GRAD = 6.0

#: absolute floor per dtype (relative to the reference's magnitude), so that a
#: float64 target compared with a float64 reference still has a little room. Gradients use the
#: same floors: each is relative to the largest |gradient| of the tensor compared, so a gradient
#: summed over many rows (dk, dv, dweight) scales its floor with itself.
FLOOR = {
    torch.float64: 1e-10,
    torch.float32: 2e-6,
    torch.float16: 2e-3,
    torch.bfloat16: 1.6e-2,
}


@dataclass
class Comparison:
    ok: bool
    max_error: float
    allowed: float
    naive_error: float
    where: tuple[int, ...] | None
    reason: str = ""
    #: the multiple of the naive error that was allowed (K, or K_GRAD for a gradient)
    k: float = K

    def describe(self) -> str:
        loc = f" at index {self.where}" if self.where is not None else ""
        why = f" ({self.reason})" if self.reason else ""
        return (f"max error {self.max_error:.3e}{loc} vs allowed {self.allowed:.3e} "
                f"(= {self.k:g} x naive same-dtype error {self.naive_error:.3e} + floor){why}")


def floor_for(dtype: torch.dtype) -> float:
    return FLOOR.get(dtype, FLOOR[torch.float32])


def naive_error(ref64: torch.Tensor, naive: torch.Tensor | None) -> float:
    """err(naive): max |naive - ref64| where both are finite (0 when nowhere, or no naive)."""
    if naive is None:
        return 0.0
    ref = ref64.detach().to(torch.float64).cpu()
    n = naive.detach().to(torch.float64).cpu()
    finite = torch.isfinite(ref) & torch.isfinite(n)
    return float((n - ref)[finite].abs().max()) if finite.any() else 0.0


def worst_naive(ref64: torch.Tensor, candidates) -> torch.Tensor:
    """Of several same-dtype computations of one quantity (a correct implementation may round
    like any of them), the yardstick: the one with the largest ``naive_error``. One formulation
    alone can land luckily close to the truth."""
    return max(candidates, key=lambda n: naive_error(ref64, n))


def _budget(ref: torch.Tensor, naive: torch.Tensor | None, dtype: torch.dtype,
            k: float = K) -> tuple[float, float]:
    """(allowed error, naive same-dtype error) for a float64 CPU reference ``ref``."""
    scale = max(1.0, float(ref[torch.isfinite(ref)].abs().max()) if torch.isfinite(ref).any() else 1.0)
    naive_err = naive_error(ref, naive)
    return k * naive_err + floor_for(dtype) * scale, naive_err


def allowance(ref64: torch.Tensor, naive: torch.Tensor | None = None,
              dtype: torch.dtype | None = None, k: float = K) -> float:
    """The error the policy allows against ``ref64`` (``naive``: the same math in ``dtype``).

    For checks that compare two outputs of the target with each other rather than
    one output with the reference (permutation, masked-key invariance, ...).
    """
    dtype = dtype or (naive.dtype if naive is not None else torch.float64)
    return _budget(ref64.detach().to(torch.float64).cpu(), naive, dtype, k)[0]


def compare(actual: torch.Tensor, ref64: torch.Tensor, naive: torch.Tensor | None = None,
            dtype: torch.dtype | None = None, k: float = K) -> Comparison:
    """Compare ``actual`` with a float64 reference under the policy.

    ``naive`` is the reference math done in the input dtype; when omitted (the
    input is float64, or there is no naive path) only the floor applies.
    ``dtype`` is the input dtype whose floor applies (default: ``actual``'s); ``k`` the
    multiple of the naive error (``K_GRAD`` for a gradient).
    """
    dtype = dtype or actual.dtype
    ref = ref64.detach().to(torch.float64).cpu()
    act = actual.detach().to(torch.float64).cpu()
    if act.shape != ref.shape:
        return Comparison(False, float("inf"), 0.0, 0.0, None,
                          f"shape {tuple(act.shape)} != expected {tuple(ref.shape)}", k)
    allowed, naive_err = _budget(ref, naive, dtype, k)

    ref_finite = torch.isfinite(ref)
    bad = ~torch.isfinite(act) & ref_finite
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        kind = "NaN" if torch.isnan(act[idx]) else "inf"
        return Comparison(False, float("inf"), allowed, naive_err, idx,
                          f"{kind} where the reference is {float(ref[idx]):.4g}", k)
    # where the reference itself is not finite (documented NaN rows), require the same
    mismatch = ~ref_finite & ~(torch.isnan(ref) & torch.isnan(act) | (ref == act))
    if mismatch.any():
        idx = tuple(int(i) for i in mismatch.nonzero()[0])
        return Comparison(False, float("inf"), allowed, naive_err, idx,
                          f"{float(act[idx]):.4g} where the reference is {float(ref[idx]):.4g}", k)
    if act.numel() == 0:
        return Comparison(True, 0.0, allowed, naive_err, None, k=k)
    diff = torch.where(ref_finite, (act - ref).abs(), torch.zeros_like(act))
    flat = int(diff.argmax())
    max_err = float(diff.flatten()[flat])
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return Comparison(max_err <= allowed, max_err, allowed, naive_err, where, k=k)


def assert_close(actual: torch.Tensor, ref64: torch.Tensor, naive: torch.Tensor | None = None,
                 dtype: torch.dtype | None = None, what: str = "output", k: float = K) -> Comparison:
    """``compare`` and raise ``AssertionError`` with the policy's numbers on failure."""
    cmp = compare(actual, ref64, naive, dtype, k)
    if not cmp.ok:
        raise AssertionError(f"{what} differs from the float64 reference: {cmp.describe()}")
    return cmp
