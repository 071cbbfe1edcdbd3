"""Scaling: time, memory and FLOP/s of attention kernels against sequence length n.

Cases (inputs q, k, v of shape (batch, heads, n, head_dim), seeded):
  target.sdpa            the target's scaled_dot_product_attention
  reference.naive        softmax(q k^T / sqrt(E)) v in the input dtype (registry "naive_attention")
  torch.sdpa.math|flash|efficient|cudnn   torch SDPA pinned to one backend with
                         torch.nn.attention.sdpa_kernel (efficient/cudnn: CUDA only;
                         on CPU "flash" is torch's CPU flash kernel)
  banded_window          the O(n * w) banded sliding-window kernel (harness.bench.models.banded)
  target.sliding_window  the target's sliding_window_attention (window w)
  lstm                   nn.LSTM of width heads * head_dim: sequential, O(n * d^2)

FLOPs count the useful work, 4 * b * h * n * k * d with k the average number of
keys a query sees: k = n (dense), (n + 1) / 2 (causal), the window average for the
window cases (harness.bench.models.banded.visible_keys); LSTM: 16 * b * n * d^2 (four gates,
input and recurrent matmuls). tflops = flops / median time; frac_of_peak divides by
env.json's measured matmul peak for the dtype. peak_mem_bytes: the median of up to the
profile's ``mem_repeats`` measured calls, with their min/max (harness.bench.memory).

Roles: target.sdpa and target.sliding_window run the target's code (role "target", keyed by the
target's identity); the other cases are the harness's comparison kernels. A target case's
inputs are made, and its calls validated and timed, inside the target's worker process, each
request under the per-call limit (``harness.bench.on_target``); the comparison kernels run
the same ``PointCall`` code in this process.

Timing: on CPU all sizes of a case are timed together in interleaved rounds
(``harness.bench.sweep``), so drift of a shared machine does not bend the fitted
exponent, and each size's row is written as soon as its part of the sweep is over
(``Context.record``); on CUDA point by point with ``time_cuda``. A case whose call would
take longer than the profile's ``max_call_s`` at the next size (extrapolating n^2) skips
its larger sizes (status "skipped", the reason says why), so one slow target cannot
eat the budget.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from harness.bench import Check, Context
from harness.bench.fit import fits_from_rows
from harness.bench.on_target import PointCall, point_call, timing_of
from harness.bench.points import Point, Skip, check_finite, note
from harness.bench.store import point_key
from harness.bench.sweep import Slot, run_sweep
from harness.isolation import named
from harness.runfolder import SIZE_CAP_REASON
from harness.bench.models import registry
from harness.bench.models.banded import visible_keys

SUITE = "scaling"
BACKENDS = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "cudnn": "CUDNN_ATTENTION"}
CASES = ("target.sdpa", "reference.naive", *(f"torch.sdpa.{b}" for b in BACKENDS),
         "banded_window", "target.sliding_window", "lstm")
WINDOW_CASES = ("banded_window", "target.sliding_window")
#: the cases that run the target's code (role "target"); the others are comparison kernels
TARGET_CASES = ("target.sdpa", "target.sliding_window")


def role_of(case: str) -> str:
    return "target" if case in TARGET_CASES else "comparison"
#: acceptance: fitted exponent within expected +- 0.15 (reference kernels only)
EXPECTED = {"reference.naive": 2.0, "banded_window": 1.0}
TOLERANCE = 0.15


def params_for(case: str, n: int, prof, device: str) -> dict:
    p = {"n": n, "batch": prof.batch, "heads": prof.heads, "head_dim": prof.head_dim, "dtype": prof.dtype}
    if case in WINDOW_CASES:
        p.update(window=prof.window, causal=True)
    elif case == "lstm":
        p = {"n": n, "batch": prof.batch, "dim": prof.heads * prof.head_dim, "dtype": prof.dtype}
    else:
        p["causal"] = prof.causal
    return p


def flops_for(case: str, p: dict) -> float:
    if case == "lstm":
        return 16.0 * p["batch"] * p["n"] * p["dim"] ** 2
    n = p["n"]
    if case in WINDOW_CASES:
        keys = visible_keys(n, p["window"])
    else:
        keys = (n + 1) / 2 if p.get("causal") else n
    return 4.0 * p["batch"] * p["heads"] * n * keys * p["head_dim"]


def _inputs(p: dict, device: str, seed: int = 0):
    gen = torch.Generator(device=device).manual_seed(seed)
    dtype = getattr(torch, p["dtype"])
    if "dim" in p:  # lstm
        return (torch.randn(p["batch"], p["n"], p["dim"], generator=gen, device=device).to(dtype),)
    shape = (p["batch"], p["heads"], p["n"], p["head_dim"])
    return tuple(torch.randn(shape, generator=gen, device=device).to(dtype) for _ in range(3))


def _sdpa_with_backend(backend, q, k, v, is_causal=False):
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def make_call(ctx: Context, case: str, p: dict):
    """A ``PointCall`` running ``case`` once on fresh seeded inputs. The target's cases are
    built, validated and timed in its worker process (``harness.bench.on_target``)."""
    device = ctx.device
    on_cuda = torch.device(device).type == "cuda"
    causal = bool(p.get("causal"))
    if case == "target.sdpa":
        sdpa = ctx.require("scaled_dot_product_attention")
        return named(ctx.on_target(point_call, sdpa, _inputs, p, device, (), {"is_causal": causal}),
                     "scaled_dot_product_attention")
    if case == "target.sliding_window":
        swa = ctx.require("sliding_window_attention")
        return named(ctx.on_target(point_call, swa, _inputs, p, device, (p["window"],)),
                     "sliding_window_attention")
    if case == "reference.naive":
        return PointCall(registry.create("naive_attention"), _inputs(p, device), {"is_causal": causal})
    if case == "banded_window":
        return PointCall(registry.create("banded_window", window=p["window"]), _inputs(p, device))
    if case == "lstm":
        model = registry.create("lstm", dim=p["dim"], device=device, dtype=getattr(torch, p["dtype"]))
        return PointCall(lambda x: model(x)[0], _inputs(p, device))
    if case.startswith("torch.sdpa."):
        backend_name = case.rsplit(".", 1)[1]
        if backend_name in ("efficient", "cudnn") and not on_cuda:
            raise Skip(f"SDPA backend {backend_name} is CUDA-only (device {device})")
        from torch.nn.attention import SDPBackend
        backend = getattr(SDPBackend, BACKENDS[backend_name], None)
        if backend is None:
            raise Skip(f"this torch has no SDPBackend.{BACKENDS[backend_name]}")
        return PointCall(functools.partial(_sdpa_with_backend, backend), _inputs(p, device),
                         {"is_causal": causal})
    raise ValueError(f"unknown scaling case {case!r}")


def validate(ctx: Context, case: str, p: dict):
    """Build the call, run it once (output checked, peak memory measured): (call, metrics)."""
    prof = ctx.profile.scaling
    if case == "lstm" and prof.lstm_max_n and p["n"] > prof.lstm_max_n:
        raise Skip(f"lstm is swept up to n={prof.lstm_max_n} in this profile")
    call = make_call(ctx, case, p)
    with torch.inference_mode():
        try:
            out, mem = call.validate(ctx.device, getattr(ctx.profile, "mem_repeats", 1),
                                     getattr(ctx.profile, "mem_budget_s", None))
        except RuntimeError as exc:
            if "No available kernel" in str(exc):
                raise Skip(f"torch SDPA backend cannot run these inputs: {str(exc).splitlines()[0][:200]}") from None
            raise
        check_finite(out, f"{case} output")
        expected = (p["batch"], p["n"], p["dim"]) if case == "lstm" else \
            (p["batch"], p["heads"], p["n"], p["head_dim"])
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise RuntimeError(f"{case} returned {got}, expected a tensor of shape {expected}")
    return call, mem


def _metrics(ctx: Context, case: str, p: dict, timing, extra: dict) -> dict:
    flops = flops_for(case, p)
    tflops = flops / timing.median_s / 1e12
    peak_tf = (ctx.peak_tflops or {}).get(p["dtype"])
    metrics = timing.metrics()
    metrics.update(extra)
    metrics.update(flops=flops, tflops=tflops, frac_of_peak=(tflops / peak_tf) if peak_tf else None)
    if case in WINDOW_CASES:
        metrics["visible_keys"] = visible_keys(p["n"], p["window"])
    return metrics


def _cpu_sweep(ctx: Context, case: str) -> dict:
    """Time all of ``case``'s pending sizes together, interleaved (harness.bench.sweep); each
    size is recorded (``ctx.record``) as soon as its timing is over."""
    sweeps = ctx.state.setdefault("sweeps", {})
    if case not in sweeps:
        found = sweeps[case] = {}  # filled size by size: ``measure`` reads it when recording
        pending = [p for p in ctx.state["case_params"][case] if ctx.store is None or not
                   ctx.store.is_done(point_key(SUITE, case, p, role_of(case), ctx.impl))]
        slots = [Slot(p["n"], functools.partial(validate, ctx, case, p)) for p in pending]
        points = ctx.state.get("points", {})

        def done(slot: Slot, result) -> None:
            found[slot.n] = (result, slot.metrics)
            if ctx.record is not None and (case, slot.n) in points:
                ctx.record(points[(case, slot.n)])

        with torch.inference_mode():
            run_sweep(slots, ctx.profile.scaling, Skip, note, deadline=ctx.state.get("deadline"),
                      on_done=done)
    return sweeps[case]


def _swept(ctx: Context, case: str) -> bool:
    """The case's CPU sweep has run (its sizes are measured, only to be recorded)."""
    return case in ctx.state.get("sweeps", {})


def measure(ctx: Context, case: str, p: dict) -> dict:
    if torch.device(ctx.device).type != "cuda":
        timing, extra = _cpu_sweep(ctx, case)[p["n"]]
        if isinstance(timing, BaseException):
            raise timing
        return _metrics(ctx, case, p, timing, extra)
    # CUDA: one point at a time (a dedicated device; CUDA events, L2 flushed per repetition)
    prof = ctx.profile.scaling
    slow = ctx.state.setdefault("slow", {})
    if case in slow:
        raise Skip(slow[case])
    call, extra = validate(ctx, case, p)
    timing = timing_of(call, ctx.device, rep_ms=prof.rep_ms, warmup_ms=prof.warmup_ms,
                       max_run_s=prof.max_run_s)
    nxt = [n for n in prof.sizes if n > p["n"]]
    if nxt and timing.median_s * (nxt[0] / p["n"]) ** 2 > prof.max_call_s:
        slow[case] = (f"{SIZE_CAP_REASON}: predicted {timing.median_s * (nxt[0] / p['n']) ** 2:.2f} s "
                      f"per call at n={nxt[0]} (n^2 from {timing.median_s:.3f} s at n={p['n']}), over the "
                      f"profile's per-call budget of {prof.max_call_s:g} s; larger sizes not measured")
    return _metrics(ctx, case, p, timing, extra)


def points(ctx: Context) -> list[Point]:
    prof = ctx.profile.scaling
    out = []
    case_params = ctx.state.setdefault("case_params", {})
    by_size = ctx.state.setdefault("points", {})
    ctx.state.pop("sweeps", None)
    for case in CASES:
        if not ctx.wants(case):
            continue
        case_params[case] = [params_for(case, n, prof, ctx.device) for n in prof.sizes]
        for p in case_params[case]:
            out.append(Point(SUITE, case, p, functools.partial(measure, ctx, case, p),
                             measured=functools.partial(_swept, ctx, case), role=role_of(case)))
            by_size[(case, p["n"])] = out[-1]
    return out


def fits(rows: list[dict]) -> dict:
    return fits_from_rows(rows, SUITE)


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    found = fits(rows)
    checks = []
    for case, want in EXPECTED.items():
        if not ctx.wants(case):
            continue
        if ctx.profile.name == "tiny":  # sizes too small for asymptotics: report, do not judge
            f = found.get(f"{SUITE}|{case}")
            checks.append(Check(f"scaling exponent of {case}", None,
                                f"{f['exponent']:.3f} (tiny profile: not judged)" if f else "no fit"))
            continue
        f = found.get(f"{SUITE}|{case}")
        if f is None:
            checks.append(Check(f"scaling exponent of {case}", None, "no fit (too few ok points)"))
            continue
        ok = abs(f["exponent"] - want) <= TOLERANCE
        ci = f["ci95"]
        ci_text = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "n/a"
        checks.append(Check(f"scaling exponent of {case}", ok,
                            f"{f['exponent']:.3f} (95% CI {ci_text}, n {f['n_range'][0]}..{f['n_range'][1]}); "
                            f"expected {want} +- {TOLERANCE}"))
    for key, f in sorted(found.items()):
        case = key.split("|")[1]
        if case not in EXPECTED and math.isfinite(f["exponent"]):
            checks.append(Check(f"scaling exponent of {case}", None, f"{f['exponent']:.3f} (informational)"))
    return checks
