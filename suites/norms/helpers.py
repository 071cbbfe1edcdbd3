"""Helpers the normalization suites share: building the target's norm module like
torch.nn, calling it, the float64 truth under the tolerance policy, and the
per-token probes (statistics, independence of tokens)."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from harness.spec import tolerance
from harness.suites.norms.configs import NormConfig
from harness.suites.kit import (ImplementationError, expect_tensor, impl, is_module, move, on_target, require_features, resolved,
                        submit_call)
from harness.boundary.target_ops import assign_parameters, under_autocast
from harness.reference.layernorm import layer_norm_math
from harness.suites.magnitudes import layer_norm_terms

LN, RMS, BLOCK = "LayerNorm", "RMSNorm", "residual_block"
HALF_DTYPES = (torch.float16, torch.bfloat16)


def build(target, name: str, cfg: NormConfig, eps, *, affine: bool = True, shape=None,
          dtype: torch.dtype | None = None, **params: torch.Tensor) -> nn.Module:
    """``name(shape, eps=eps, elementwise_affine=affine)`` as torch.nn is constructed, moved to the
    config's dtype and the target's device as a model would be, then the given parameters
    (``weight=``, ``bias=``; float64 values representable in the dtype) written in place
    through ``.weight``/``.bias``."""
    shape = cfg.ctor_shape if shape is None else shape
    dtype = cfg.torch_dtype if dtype is None else dtype
    mod = impl(target, name)(shape, eps=eps, elementwise_affine=affine)
    if not is_module(mod):
        raise ImplementationError(f"{name}({shape!r}, eps={eps}, elementwise_affine={affine}) returned "
                                  f"{type(mod).__name__}; the protocol constructs an nn.Module")
    mod = move(target, mod, name, device=target.device, dtype=dtype)
    if params:
        on_target(target, assign_parameters, mod, name, shape, params)
    return mod


def forward(target, mod: nn.Module, name: str, x: torch.Tensor) -> torch.Tensor:
    """``mod(x)``, guarded (under ``target``'s per-call limit); the output must have x's shape,
    dtype and device."""
    return submit_forward(target, mod, name, x).result()


def submit_forward(target, mod: nn.Module, name: str, x: torch.Tensor):
    """``forward`` as a ``Pending`` (``submit``): ``agree``, ``matches`` and ``unchanged`` read it
    after they computed the reference, which a worker overlaps with the target's call."""
    with torch.no_grad():
        pending = submit_call(target, mod, name, x)
    return pending.then(lambda out: expect_tensor(out, name, tuple(x.shape), x.dtype, x.device))


def naive_dtype(dtype: torch.dtype, wide: bool = False) -> torch.dtype:
    """The dtype of the policy's "naive same-precision math".

    ``wide``: where the half-precision math itself over- or underflows (|x| >= 300:
    x^2 > 65504; mean squares near a small eps: x^2 below float16's normal range),
    the yardstick is the float32 math rounded to the input dtype, which is what
    torch does (opmath) and what "match a float32 reference" means.
    """
    return torch.float32 if wide and dtype in HALF_DTYPES else dtype


def truth(math: Callable, x: torch.Tensor, **kw) -> torch.Tensor:
    return math(x.cpu(), compute_dtype=torch.float64, **kw)


def terms(math: Callable, x: torch.Tensor, **kw) -> torch.Tensor | None:
    """The running-error magnitude of math(x) (``suites.magnitudes``): LayerNorm's x - mean
    cancels (one normalized element, constant rows); RMSNorm subtracts nothing (None)."""
    return layer_norm_terms(x, **kw) if math is layer_norm_math else None


def terms_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision a norm's cancelling step (x - mean) is formed in: float32 for half inputs
    (the suites require float32 statistics: the planted ``ln_fp16_compute``)."""
    return naive_dtype(dtype, wide=True)


def naive(math: Callable, x: torch.Tensor, wide: bool = False, **kw) -> torch.Tensor:
    return math(x.cpu(), compute_dtype=naive_dtype(x.dtype, wide), **kw).to(x.dtype)


def agree(out, x, math: Callable, what: str = "output", wide: bool = False, **kw) -> tolerance.Comparison:
    """``out`` (or a ``submit_forward``) equals math(x, **kw) under the tolerance policy."""
    ref, nai, t = truth(math, x, **kw), naive(math, x, wide, **kw), terms(math, x, **kw)
    return tolerance.assert_close(resolved(out), ref, nai, dtype=x.dtype, what=what, terms=t,
                                  terms_dtype=terms_dtype(x.dtype))


def matches(out, x, math: Callable, wide: bool = False, **kw) -> bool:
    ref, nai, t = truth(math, x, **kw), naive(math, x, wide, **kw), terms(math, x, **kw)
    return tolerance.compare(resolved(out), ref, nai, dtype=x.dtype, terms=t, terms_dtype=terms_dtype(x.dtype)).ok


def allowance(x, math: Callable, **kw) -> float:
    """The error the tolerance policy allows for math(x, **kw)."""
    nai = naive(math, x, **kw)
    return tolerance.allowance(truth(math, x, **kw), nai, dtype=x.dtype, terms=terms(math, x, **kw),
                               terms_dtype=terms_dtype(x.dtype))


def worst(a: torch.Tensor, b: torch.Tensor) -> tuple[float, tuple[int, ...]]:
    """max |a - b| (inf where either is not finite) and where."""
    d = (a.double().cpu() - b.double().cpu()).abs().nan_to_num(float("inf"), float("inf"))
    if d.numel() == 0:
        return 0.0, ()
    flat = int(d.argmax())
    return float(d.flatten()[flat]), tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), d.shape))


def unchanged(out_a, out_b, x_a, x_b, math: Callable, what: str, **kw) -> None:
    """Two outputs of the target that an invariance says are equal *up to* what the float64
    reference itself changes between x_a and x_b (eps, input rounding), plus the policy's
    allowance for each call."""
    ref_gap, _ = worst(truth(math, x_a, **kw), truth(math, x_b, **kw))
    slack = allowance(x_a, math, **kw) + allowance(x_b, math, **kw) + ref_gap
    gap, idx = worst(resolved(out_a), resolved(out_b))
    if gap > slack:
        raise AssertionError(f"{what}: the outputs differ by {gap:.3e} at index {idx}, allowed "
                             f"{slack:.3e} (the reference's own change {ref_gap:.3e} + the "
                             f"tolerance policy's allowance for each call)")


def token_stats(y: torch.Tensor, nd: int) -> torch.Tensor:
    """Per-token (mean, biased variance, mean square) over the trailing nd dims, float64."""
    h = y.detach().double().cpu().flatten(start_dim=y.dim() - nd)  # (*lead, F)
    mean = h.mean(-1)
    return torch.stack([mean, (h - mean[..., None]).pow(2).mean(-1), h.pow(2).mean(-1)], -1)


def check_token_dims(target, name: str, cfg: NormConfig, mod: nn.Module, math: Callable, **kw) -> None:
    """Each token's output depends on exactly its own normalized_shape elements:
    (a) shifting another token (another batch item or position) by +-10 std changes nothing
        here, unlike batch norm or statistics over the whole tensor;
    (b) changing one element of a token changes that token's output as the reference's
        changes: the statistics span all of normalized_shape, not just the last dim."""
    nd = len(cfg.normalized_shape)
    x = cfg.x(target.device)
    std = 2.0 ** cfg.log2_scale
    pending = submit_forward(target, mod, name, x)
    allowed = allowance(x, math, **kw)
    out = pending.result()
    flat = lambda t: t.reshape(cfg.tokens, cfg.features)  # noqa: E731  (T, F) view of (*lead, *ns)
    g = cfg.generator(salt=5)
    t = int(torch.randint(0, cfg.tokens, (1,), generator=g))
    if cfg.tokens > 1:
        others = torch.arange(cfg.tokens) != t
        for shift in (10 * std, -10 * std):  # one of the two reorders every feature across tokens
            x2 = flat(x.double().clone())
            x2[t] += shift
            x2 = x2.reshape(x.shape).to(x.dtype)
            gap, idx = worst(flat(forward(target, mod, name, x2))[others], flat(out)[others])
            if gap > 2 * allowed:
                raise AssertionError(
                    f"adding {shift:g} to token {t} (of {cfg.tokens} tokens, lead dims {cfg.lead}) changed "
                    f"the output of the other tokens by {gap:.3e}: the statistics mix tokens (batch-norm "
                    f"style or over the whole tensor); they must span only the trailing normalized_shape "
                    f"{cfg.normalized_shape}")
    if cfg.features > 1:
        j = int(torch.randint(0, cfg.features, (1,), generator=g))
        x3 = flat(x.double().clone())
        x3[t, j] += 3 * std + abs(float(x3[t, j]))
        x3 = x3.reshape(x.shape).to(x.dtype)
        out3 = forward(target, mod, name, x3)
        d_target = flat(out3)[t].double() - flat(out)[t].double()
        d_ref = flat(truth(math, x3, **kw))[t] - flat(truth(math, x, **kw))[t]
        slack = allowed + allowance(x3, math, **kw)
        gap, idx = worst(d_target, d_ref)
        if gap > slack:
            pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx[0]), cfg.normalized_shape))
            src = tuple(int(i) for i in torch.unravel_index(torch.tensor(j), cfg.normalized_shape))
            raise AssertionError(
                f"changing element {src} of token {t} changed that token's output at {pos} by "
                f"{float(d_target[idx]):.4g}, but the reference's changes by {float(d_ref[idx]):.4g} "
                f"(allowed difference {slack:.3e}): the statistics must span all of normalized_shape "
                f"{cfg.normalized_shape}, not only some of its dims"
                + (f"\n  token's output:    {flat(out)[t].tolist()[:8]}\n"
                   f"  reference output:  {flat(truth(math, x, **kw))[t].tolist()[:8]}" if nd > 1 else ""))


def autocast_agree(target, name: str, mod: nn.Module, x: torch.Tensor, half: str, math: Callable, **kw) -> None:
    """``mod(x)`` for float32 ``x`` and a float32 module called inside ``torch.autocast(half)``, as
    mixed-precision training calls a norm. Autocast keeps norms in float32 (torch.nn's return
    float32 at float32 precision); a statistic computed by a matmul, ``linear`` or ``einsum`` is
    silently run in ``half``. The output may be float32 (then it is held to the float32
    tolerance: the precision autocast keeps must not be lost) or ``half`` (held to its own)."""
    require_features(target, "autocast")
    device_type = torch.device(target.device).type
    out = on_target(target, under_autocast, device_type, half, mod, x)
    if isinstance(out, torch.Tensor) and out.dtype == getattr(torch, half):
        dtype = out.dtype
    else:
        dtype = torch.float32
    out = expect_tensor(out, name, tuple(x.shape), dtype, x.device)
    nai = math(x.cpu(), compute_dtype=torch.float32, **kw).to(dtype)
    cmp = tolerance.compare(out, truth(math, x, **kw), nai, dtype=dtype, terms=terms(math, x, **kw),
                            terms_dtype=torch.float32)
    if not cmp.ok:
        raise AssertionError(
            f"{name} of float32 x under torch.autocast({device_type!r}, {half}) returned {dtype} that differs "
            f"from the float64 math: {cmp.describe()}; autocast keeps norms in float32, so the statistics must "
            f"not be computed in {half} (a matmul, linear or einsum that forms the mean or the mean square "
            f"is autocast to {half})")
