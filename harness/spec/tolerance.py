"""The one tolerance policy every numerical comparison in the harness uses.

As FlashAttention's and PyTorch's own tests do, the allowed error of an
implementation is a multiple of the error that the *same math done naively in
the input dtype* makes against a float64 reference, plus a small floor:

    err(actual)  = max |actual - ref64|
    err(naive)   = max |naive_in_dtype - ref64|
    allowed[i]   = K * err(naive) + FLOOR[dtype] * max(1, max |ref64|) + C_TERMS * u(dtype) * terms[i]

The last term follows cancellation. A result that is (near) zero in exact math but formed
from large terms -- the row sum of the attention backward, dS = P (dP - rowsum(P dP)), with one
key; LayerNorm's x - mean with one normalized element -- carries a rounding error of the size
of its *terms*, not of itself; the floor is relative to the result and the naive yardstick can
cancel luckily (to exactly 0). ``terms`` (optional, float64, broadcastable to the reference) is
the standard running-error magnitude of each element: the same math evaluated on absolute
values (a sum contributes sum |terms|, a product |a| |b|, a difference |a| + |b|), e.g. for the
attention backward dS_abs = P (|dO| |V|^T + rowsum(P |dO| |V|^T)), dK_abs = scale dS_abs^T |Q|
(``suites.magnitudes``). Every correctly rounded operation is off by at most u = eps/2 of
its result, so an implementation that chains a few rounding stages over the same terms is off
by a few u x terms wherever it cancels; elsewhere terms ~ |result| and this adds ~C u |result|,
well below the floor. The check is elementwise: a wrong value next to small terms gets no room.

NaN or inf where the reference is finite never passes. K, the floors and C_TERMS live
here and nowhere else.

Reported, not judged: every comparison's error and allowance in ULPs of the output scale
(``ulp(dtype) * max(1, max |ref|)``) are in a failure's message, and while the plug-in observes a
property's call (``observe``/``observed``) the comparisons are kept, so that the conformance report
carries per dtype how close to the edge the target ran (``error_summary``: passes too).
"""
from __future__ import annotations

import math
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


#: multiple of u(dtype) x the running-error magnitude ``terms`` of an element. A kernel chains a
#: few rounding stages over the same terms (products, an accumulation, the subtraction that
#: cancels, the final cast), each within u of its result; accumulations are blocked, pairwise or
#: in a wider accumulator, so in practice they stay within ~u sum|terms| rather than the worst
#: case (n - 1) u sum|terms|. Measured beyond K_GRAD x naive + floor on correct backwards (torch
#: CPU SDPA, LayerNorm and RMSNorm in float32/float16/bfloat16 with one-element and constant rows;
#: a float16 FlashAttention-style backward with D = rowsum(dO O), tests/controls/; ~1300 random
#: cases with value shifts and single keys): at most 0.51 u x terms. 2 leaves a margin of 4;
#: tests/test_tolerance.py shows the planted bugs' margins under it.
C_TERMS = 2.0


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = eps / 2: the largest relative error of one correctly rounded operation in ``dtype``
    (float32's for a non-float dtype)."""
    return torch.finfo(dtype if dtype.is_floating_point else torch.float32).eps / 2


def ulp(dtype: torch.dtype) -> float:
    """The spacing of ``dtype``'s numbers at 1 (eps = 2u): the unit errors are reported in, relative to
    the output's scale max(1, max |ref|) ("ULPs of the output scale")."""
    return 2 * unit_roundoff(dtype)


def output_scale(ref: torch.Tensor) -> float:
    """max(1, max |ref|) over the finite elements: what the floor and the reported ULPs are relative to."""
    finite = torch.isfinite(ref)
    return max(1.0, float(ref[finite].abs().max()) if finite.any() else 1.0)


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
    #: the cancellation term C_TERMS * u * terms at ``where`` (0 without ``terms``)
    terms_allowed: float = 0.0
    #: the compared dtype (its ULP is the report's unit) and the output's scale, max(1, max |ref|)
    dtype: torch.dtype | None = None
    scale: float = 1.0

    def ulps(self, value: float) -> float:
        """``value`` in ULPs of the output scale (``ulp(dtype) * scale``)."""
        return value / (ulp(self.dtype or torch.float64) * self.scale)

    @property
    def margin(self) -> float:
        """error / allowed at the worst element (> 1: fails); inf for NaN, a shape or non-finite mismatch."""
        if self.max_error == 0:
            return 0.0
        return self.max_error / self.allowed if self.allowed > 0 else float("inf")

    def describe(self) -> str:
        loc = f" at index {self.where}" if self.where is not None else ""
        why = f" ({self.reason})" if self.reason else ""
        terms = (f" + {C_TERMS:g} u x the magnitude of its terms {self.terms_allowed:.3e}"
                 if self.terms_allowed else "")
        in_ulps = (f"; {self.ulps(self.max_error):.3g} vs {self.ulps(self.allowed):.3g} ULPs of the output scale "
                   f"({str(self.dtype).removeprefix('torch.')})"
                   if self.dtype is not None and math.isfinite(self.max_error) else "")
        return (f"max error {self.max_error:.3e}{loc} vs allowed {self.allowed:.3e} "
                f"(= {self.k:g} x naive same-dtype error {self.naive_error:.3e} + floor{terms}){in_ulps}{why}")


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
            k: float = K, scale: float | None = None) -> tuple[float, float]:
    """(allowed error, naive same-dtype error) for a float64 CPU reference ``ref`` (``scale``: its
    ``output_scale`` when the caller has it)."""
    scale = output_scale(ref) if scale is None else scale
    naive_err = naive_error(ref, naive)
    return k * naive_err + floor_for(dtype) * scale, naive_err


def terms_allowance(terms: torch.Tensor | None, shape, dtype: torch.dtype) -> torch.Tensor | None:
    """C_TERMS * u(dtype) * terms, float64, broadcast to ``shape`` (None without terms; a
    non-finite magnitude adds nothing). ``dtype``: the precision the terms are combined in."""
    if terms is None:
        return None
    mag = terms.detach().to(torch.float64).cpu().abs().nan_to_num(0.0, 0.0, 0.0)
    return (C_TERMS * unit_roundoff(dtype) * mag).expand(shape)


def allowance(ref64: torch.Tensor, naive: torch.Tensor | None = None,
              dtype: torch.dtype | None = None, k: float = K, terms: torch.Tensor | None = None,
              terms_dtype: torch.dtype | None = None) -> float:
    """The error the policy allows against ``ref64`` (``naive``: the same math in ``dtype``),
    with the cancellation term of the largest ``terms`` (one number for the whole tensor).

    For checks that compare two outputs of the target with each other rather than
    one output with the reference (permutation, masked-key invariance, ...).
    """
    dtype = dtype or (naive.dtype if naive is not None else torch.float64)
    ref = ref64.detach().to(torch.float64).cpu()
    extra = terms_allowance(terms, ref.shape, terms_dtype or dtype)
    top = float(extra.max()) if extra is not None and extra.numel() else 0.0
    return _budget(ref, naive, dtype, k)[0] + top


def compare(actual: torch.Tensor, ref64: torch.Tensor, naive: torch.Tensor | None = None, *,
            dtype: torch.dtype | None = None, k: float = K, terms: torch.Tensor | None = None,
            terms_dtype: torch.dtype | None = None) -> Comparison:
    """Compare ``actual`` with a float64 reference under the policy.

    ``naive`` is the reference math done in the input dtype; when omitted (the
    input is float64, or there is no naive path) only the floor applies.
    ``dtype`` is the input dtype whose floor applies (default: ``actual``'s); ``k`` the
    multiple of the naive error (``K_GRAD`` for a gradient); ``terms`` the running-error
    magnitude of each element (see the module docstring), which adds C_TERMS * u * terms there,
    u of ``terms_dtype`` (default ``dtype``: where a protocol requires the cancelling step in a
    wider precision, e.g. a norm's statistics in float32 for half inputs, that one's).
    The element reported is the one with the largest error / allowed.
    """
    dtype = dtype or actual.dtype
    ref = ref64.detach().to(torch.float64).cpu()
    act = actual.detach().to(torch.float64).cpu()
    scale = output_scale(ref)
    cmp = _compare(act, ref, naive, dtype, k, terms, terms_dtype, scale)
    cmp.dtype, cmp.scale = dtype, scale
    if _OBSERVED is not None:
        _OBSERVED.append(cmp)
    return cmp


def _compare(act, ref, naive, dtype, k, terms, terms_dtype, scale) -> Comparison:
    if act.shape != ref.shape:
        return Comparison(False, float("inf"), 0.0, 0.0, None,
                          f"shape {tuple(act.shape)} != expected {tuple(ref.shape)}", k)
    allowed, naive_err = _budget(ref, naive, dtype, k, scale)

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
    extra = terms_allowance(terms, ref.shape, terms_dtype or dtype)
    if extra is None:
        flat = int(diff.argmax())
        max_err = float(diff.flatten()[flat])
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        return Comparison(max_err <= allowed, max_err, allowed, naive_err, where, k=k)
    bound = allowed + extra
    flat = int((diff / bound).argmax())
    max_err, here = float(diff.flatten()[flat]), float(bound.flatten()[flat])
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return Comparison(bool((diff <= bound).all()), max_err, here, naive_err, where, k=k,
                      terms_allowed=float(extra.flatten()[flat]))


#: the comparisons made while a property's test runs (``observe`` starts, ``observed`` ends): the
#: conformance report's error column. None when nothing observes (a comparison is not kept).
_OBSERVED: list[Comparison] | None = None


def observe() -> None:
    """Keep every comparison from now on (the plug-in, when a property's call phase starts)."""
    global _OBSERVED
    _OBSERVED = []


def observed() -> list[Comparison]:
    """The comparisons kept since ``observe`` (and stop keeping them)."""
    global _OBSERVED
    out, _OBSERVED = _OBSERVED or [], None
    return out


def error_summary(comparisons: list[Comparison], failed: bool) -> dict[str, dict]:
    """Per dtype, how close to the edge the target ran: the comparison with the largest error /
    allowed, as ``{"error_ulps", "allowed_ulps", "margin", "comparisons"}`` (ULPs of the output
    scale; margin > 1 fails). A passing property's comparisons that failed are alternatives a check
    tried and rejected (a convention not followed, a rule's other length), not the target's error:
    only those that passed count; a failing property's worst is its failure's."""
    out: dict[str, dict] = {}
    for cmp in comparisons:
        if cmp.dtype is None or not (failed or cmp.ok) or not math.isfinite(cmp.margin):
            continue
        name = str(cmp.dtype).removeprefix("torch.")
        entry = out.get(name)
        if entry is None or cmp.margin > entry["margin"]:
            out[name] = entry = {"error_ulps": round(cmp.ulps(cmp.max_error), 4),
                                 "allowed_ulps": round(cmp.ulps(cmp.allowed), 4), "margin": round(cmp.margin, 4),
                                 "comparisons": entry["comparisons"] if entry else 0}
        entry["comparisons"] += 1
    return out


def assert_close(actual: torch.Tensor, ref64: torch.Tensor, naive: torch.Tensor | None = None, *,
                 dtype: torch.dtype | None = None, what: str = "output", k: float = K,
                 terms: torch.Tensor | None = None, terms_dtype: torch.dtype | None = None) -> Comparison:
    """``compare`` and raise ``AssertionError`` with the policy's numbers on failure."""
    cmp = compare(actual, ref64, naive, dtype=dtype, k=k, terms=terms, terms_dtype=terms_dtype)
    if not cmp.ok:
        raise AssertionError(f"{what} differs from the float64 reference: {cmp.describe()}")
    return cmp
