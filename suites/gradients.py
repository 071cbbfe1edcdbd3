"""Helpers the gradient suites share: the target's forward and backward (in its worker), the
float64 autograd truth and the naive same-dtype autograd yardstick, the comparison under the
tolerance policy with ``K_GRAD``, and the exact-zero check of the structural properties.

A gradient property runs the target's forward and backward with a random upstream gradient
``g`` (output-shaped) and compares every input gradient with float64 autograd of the
reference math (``reference/``); the allowed error is ``K_GRAD`` times the error of autograd
through the same naive math in the input dtype, plus the dtype's floor.
"""
from __future__ import annotations

from typing import Callable, Sequence

import pytest
import torch

from harness.spec import tolerance
from harness.suites.kit import UNSUPPORTED, check_convention, expect_tensor, require_features, submit_on_target
from harness.boundary.interpret import gradcheck_fast
from harness.boundary.target_ops import backward
from harness.suites.attention.helpers import poison


#: gradcheck's step and elementwise tolerance |numerical - analytical| <= atol + rtol |numerical|: float64
#: central differences on O(1) inputs are good to ~1e-10, so a backward 1e-6 off passes, 3e-6 off fails
GRADCHECK = {"eps": 1e-6, "atol": 1e-8, "rtol": 1e-6}


def gradcheck_options(target) -> dict:
    """``GRADCHECK`` for ``target_ops.gradcheck``, with gradcheck's fast mode (the Jacobian projected
    on random vectors) for an interpreted Triton kernel in the smoke tier (``harness.boundary.interpret``:
    the full Jacobian of a tiny attention call is ~200 interpreted calls)."""
    return {**GRADCHECK, "fast_mode": gradcheck_fast(target)}


def skip_unless_float64(target, cfg) -> None:
    """A gradcheck property's tiny float64 config: skipped ``unsupported (declared: ...)`` for a
    target whose HARNESS_DTYPES / HARNESS_SIZES leave it out (the only dtype gradcheck draws)."""
    if not target.supports(cfg):
        pytest.skip(f"{UNSUPPORTED} (declared: float64 inputs of these tiny shapes are outside HARNESS_DTYPES / "
                    f"HARNESS_SIZES; gradcheck needs float64)")


def target_grads(target, fn, args: tuple, kwargs: dict, wrt: tuple[int, ...], g: torch.Tensor, *,
                 module=None, params: tuple[str, ...] = (), seed: int | None = None):
    """``fn(*args, **kwargs)`` and its backward with upstream ``g``, where the target lives
    (``seed``: both under ``target_ops.manual_seed(seed)``, for a dropout call).

    Returns ``(output, [grad of args[i] for i in wrt], {param: grad})``; a gradient the backward
    did not reach is zeros (a lost gradient then fails the comparison). A target without a
    backward (declared ``HARNESS_UNSUPPORTED = {"backward"}``, an output without grad_fn, or a
    backward raising NotImplementedError) is reported ``unsupported (no backward: ...)``."""
    return submit_grads(target, fn, args, kwargs, wrt, g, module=module, params=params, seed=seed).result()


def submit_grads(target, fn, args: tuple, kwargs: dict, wrt: tuple[int, ...], g: torch.Tensor, *,
                 module=None, params: tuple[str, ...] = (), seed: int | None = None):
    """``target_grads`` as a ``Pending`` (``submit_on_target``): compute the float64 reference
    gradients before ``.result()``, which a worker overlaps with the target's backward.

    A target that declares ``backward_determinism: deterministic`` is held to it by every gradient
    property (issue 48, item 3, for every differentiable name): the forward and backward run a
    second time on the same inputs and must give bitwise the same output and gradients (NaN equal to
    NaN); a difference is that convention's mismatch, with the largest spread."""
    require_features(target, "backward")

    def checked(reply):
        out, grads, pgrads, why = reply
        if why is not None:
            pytest.skip(f"{UNSUPPORTED} (no backward: {why})")
        if target.conventions.get("backward_determinism") == "deterministic":
            again = submit_on_target(target, backward, fn, args, kwargs, wrt, g, module, params, seed).result()
            _same_bits(target, (out, grads, pgrads), again[:3])
        grads = [torch.zeros_like(args[i]) if d is None else d for i, d in zip(wrt, grads)]
        for i, d in zip(wrt, grads):
            expect_tensor(d, f"the gradient of argument {i}", tuple(args[i].shape), args[i].dtype, args[i].device)
        return out, grads, pgrads

    return submit_on_target(target, backward, fn, args, kwargs, wrt, g, module, params, seed).then(checked)


def bitwise_spread(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """None when ``a`` and ``b`` are bitwise equal (NaN equal to NaN), else their largest difference (a NaN
    against a number: inf; shapes that differ: 0.0, a difference without a size)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    if a.shape != b.shape:
        return 0.0
    if bool(((a == b) | (a.isnan() & b.isnan())).all()):
        return None
    return float((a - b).abs().nan_to_num(float("inf")).max())


def _same_bits(target, first, second) -> None:
    """Two runs' (output, [grads], {param: grads}) bitwise equal, or ``backward_determinism``'s mismatch."""
    def flat(run):
        out, grads, pgrads = run
        return [("the output", out), *((f"the gradient of input {i}", d) for i, d in enumerate(grads)),
                *((f"d{name}", d) for name, d in pgrads.items())]

    spread, differs = 0.0, []
    for (what, a), (_, b) in zip(flat(first), flat(second)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            continue
        apart = bitwise_spread(a, b)
        if apart is not None:
            differs.append(what)
            spread = max(spread, apart)
    if differs:
        check_convention("backward_determinism", "nondeterministic", target.conventions,
                         f" Two forward and backward passes on identical inputs differ bitwise ({', '.join(differs)}), "
                         f"by up to {spread:.3g}.")


def upstream(shape, dtype: torch.dtype, gen: torch.Generator, device="cpu") -> torch.Tensor:
    """A random upstream gradient N(0, 1) of ``shape``, in ``dtype``."""
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def qkv_and_upstream(target, cfg, salt: int = 9):
    """An attention config's query, key, value (``cfg.qkv``) on the target's device, and a random
    upstream gradient dO of the output's shape."""
    q, k, v = cfg.qkv(target.device)
    return q, k, v, upstream(cfg.out_shape(), cfg.torch_dtype, cfg.generator(salt), target.device)


def poison_for_backward(q, k, v, cols: torch.Tensor, gen: torch.Generator, g: torch.Tensor, *,
                        scale: float | None = None):
    """``suites.attention.helpers.poison`` (K and V at key positions ``cols`` set to +-1e4, K capped for the
    scores), with those values shrunk too, if needed, so that dP = dO V^T stays below a quarter
    of the dtype's max: a correct backward that forms dP in the input dtype (Hugging Face eager
    attention in float16) would overflow there, and P * inf = NaN in dS, before any mask is
    tested. Values this large still expose a backward that leaks gradient into masked keys."""
    k2, v2 = poison(q, k, v, cols, gen, scale)
    bad = v2[..., cols, :].double()
    dp = g.double().cpu() @ bad.cpu().repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3).transpose(-2, -1)
    peak = float(dp.abs().max()) if dp.numel() else 0.0
    cap = torch.finfo(v.dtype).max / 4
    if peak > cap:
        v2[..., cols, :] = (bad * (cap / peak)).to(v.dtype)
    return k2, v2


def autograd_of(fn: Callable, tensors: Sequence[torch.Tensor], g: torch.Tensor) -> list[torch.Tensor]:
    """Gradients of ``fn(*tensors)`` (harness math, on the CPU) for the upstream ``g`` (cast to
    the output's dtype); a tensor the output does not depend on gets zeros."""
    leaves = [t.detach().cpu().clone().requires_grad_(True) for t in tensors]
    with torch.enable_grad():
        out = fn(*leaves)
        grads = torch.autograd.grad(out, leaves, g.detach().cpu().to(out.dtype), allow_unused=True)
    return [torch.zeros_like(t) if d is None else d.detach() for t, d in zip(leaves, grads)]


def worst_each(truths: Sequence[torch.Tensor], candidates: Sequence[Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    """Per gradient, the naive candidate furthest from the truth (``tolerance.worst_naive``)."""
    return [tolerance.worst_naive(t, [c[i] for c in candidates]) for i, t in enumerate(truths)]


def assert_grads(names: Sequence[str], actual, truths, naives, dtype: torch.dtype, what: str, *,
                 terms: Sequence[torch.Tensor] | None = None) -> None:
    """Each gradient equals its float64 truth under the policy (``K_GRAD`` x naive + floor +
    C_TERMS u x its ``terms``, the running-error magnitudes, when given)."""
    terms = terms if terms is not None else [None] * len(truths)
    for name, a, t, n, m in zip(names, actual, truths, naives, terms):
        tolerance.assert_close(a, t, n, dtype=dtype, what=f"{name} {what}", k=tolerance.K_GRAD, terms=m)


def grad_allowance(truth: torch.Tensor, naive: torch.Tensor, dtype: torch.dtype,
                   terms: torch.Tensor | None = None) -> float:
    """What the policy allows for one gradient (for comparing two of the target's gradients)."""
    return tolerance.allowance(truth, naive, dtype=dtype, k=tolerance.K_GRAD, terms=terms)


def assert_zero(grad: torch.Tensor, where: torch.Tensor, dim: int, what: str) -> None:
    """``grad`` is exactly zero at the indices ``where`` (bool) along ``dim``: no tolerance."""
    picked = grad.detach().double().cpu().index_select(dim, where.cpu().nonzero().flatten())
    if picked.numel() and not bool((picked == 0).all()):
        bad = (picked != 0).nonzero()[0].tolist()
        bad[dim] = int(where.cpu().nonzero().flatten()[bad[dim]])
        raise AssertionError(f"{what}: nonzero ({float(grad[tuple(bad)]):.4g}) at index {tuple(bad)}, "
                             f"must be exactly 0")
