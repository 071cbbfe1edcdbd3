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

Passes (the ``pass`` parameter, ``harness.verdicts.runfolder.PASSES``; which ones: the profile's
``passes``, ``bench --passes``): every case is timed as its forward ("fwd"), its backward alone
("bwd": the forward runs once, untimed, outside the timed region, and each timed call is
``torch.autograd.grad(out, inputs, dO, retain_graph=True)`` with a fixed seeded upstream
gradient dO; the LSTM's weights are differentiated too) and forward and backward together
("fwd_bwd"); ``harness.bench.on_target.PointCall``. A kernel without a backward
(its output has no grad_fn, or its backward raises NotImplementedError or torch's "not
implemented") gets its backward points skipped, the reason starting "no backward:"; any other
exception in its backward is an error point, as in the forward. The passes run pass by pass
(every case's forward first), so a time budget costs forward+backward points before forward ones.

FLOPs count the useful work of the forward, 4 * b * h * n * k * d with k the average number
of keys a query sees: k = n (dense), (n + 1) / 2 (causal), the window average for the
window cases (harness.bench.models.banded.visible_keys); LSTM: 16 * b * n * d^2 (four gates,
input and recurrent matmuls). The backward counts ``PASS_FLOPS`` times that: 2.5x
(FlashAttention's convention: its backward runs five n x n matmuls -- the scores recomputed,
dV, dP, dQ, dK -- to the forward's two), forward+backward 3.5x; the same factors for every
case, whatever it recomputes (for the LSTM, whose backward is about 2x its forward, the factor
is the convention, not its count), so TFLOP/s compare across passes and kernels.
tflops = flops / median time; frac_of_peak divides by env.json's measured matmul peak for the
dtype. peak_mem_bytes: the median of up to the profile's ``mem_repeats`` measured calls, with
their min/max (harness.bench.memory); for the backward, what the backward allocates beyond the
forward's graph, which exists before it starts.

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
from harness.bench.fit import fit_key, fits_from_rows
from harness.bench.on_target import PointCall, point_call, timing_of
from harness.bench.points import NonFinite, Point, Skip, check_finite, note
from harness.bench.store import point_key
from harness.bench.sweep import Slot, run_sweep
from harness.boundary.handles import named
from harness.verdicts.runfolder import PASS_WORDS, PASSES, SIZE_CAP_REASON, pass_of
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
#: FLOPs of a pass over the forward's (module doc: FlashAttention's convention)
PASS_FLOPS = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}
#: acceptance: fitted exponent within expected +- 0.15 (reference kernels only)
EXPECTED = {"reference.naive": 2.0, "banded_window": 1.0}
TOLERANCE = 0.15


def params_for(case: str, n: int, prof, device: str, pass_: str = "fwd") -> dict:
    p = {"n": n, "batch": prof.batch, "heads": prof.heads, "head_dim": prof.head_dim, "dtype": prof.dtype}
    if case in WINDOW_CASES:
        p.update(window=prof.window, causal=True)
    elif case == "lstm":
        p = {"n": n, "batch": prof.batch, "dim": prof.heads * prof.head_dim, "dtype": prof.dtype}
    else:
        p["causal"] = prof.causal
    p["pass"] = pass_  # "fwd" is left out of the key (harness.verdicts.runfolder.make_key)
    return p


def flops_for(case: str, p: dict) -> float:
    """The useful FLOPs of the point's pass: the forward's count (module doc) times
    ``PASS_FLOPS[pass]`` (backward 2.5x, forward+backward 3.5x)."""
    factor = PASS_FLOPS[pass_of(p)]
    if case == "lstm":
        return factor * 16.0 * p["batch"] * p["n"] * p["dim"] ** 2
    n = p["n"]
    if case in WINDOW_CASES:
        keys = visible_keys(n, p["window"])
    else:
        keys = (n + 1) / 2 if p.get("causal") else n
    return factor * 4.0 * p["batch"] * p["heads"] * n * keys * p["head_dim"]


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
    """A ``PointCall`` running ``case``'s pass once on fresh seeded inputs. The target's cases
    are built, validated and timed in its worker process (``harness.bench.on_target``)."""
    device = ctx.device
    on_cuda = torch.device(device).type == "cuda"
    causal = bool(p.get("causal"))
    pass_ = pass_of(p)
    if case == "target.sdpa":
        sdpa = ctx.require("scaled_dot_product_attention")
        return named(ctx.on_target(point_call, sdpa, _inputs, p, device, (), {"is_causal": causal}, pass_),
                     "scaled_dot_product_attention")
    if case == "target.sliding_window":
        swa = ctx.require("sliding_window_attention")
        return named(ctx.on_target(point_call, swa, _inputs, p, device, (p["window"],), None, pass_),
                     "sliding_window_attention")
    if case == "reference.naive":
        return PointCall(registry.create("naive_attention"), _inputs(p, device), {"is_causal": causal}, pass_)
    if case == "banded_window":
        return PointCall(registry.create("banded_window", window=p["window"]), _inputs(p, device), None, pass_)
    if case == "lstm":
        model = registry.create("lstm", dim=p["dim"], device=device, dtype=getattr(torch, p["dtype"]))
        return PointCall(lambda x: model(x)[0], _inputs(p, device), None, pass_, tuple(model.parameters()))
    if case.startswith("torch.sdpa."):
        backend_name = case.rsplit(".", 1)[1]
        if backend_name in ("efficient", "cudnn") and not on_cuda:
            raise Skip(f"SDPA backend {backend_name} is CUDA-only (device {device})")
        from torch.nn.attention import SDPBackend
        backend = getattr(SDPBackend, BACKENDS[backend_name], None)
        if backend is None:
            raise Skip(f"this torch has no SDPBackend.{BACKENDS[backend_name]}")
        return PointCall(functools.partial(_sdpa_with_backend, backend), _inputs(p, device),
                         {"is_causal": causal}, pass_)
    raise ValueError(f"unknown scaling case {case!r}")


def _forward_only(p: dict):
    """Inference mode for a forward point; off for a backward one (its inputs and the LSTM's
    weights must be able to require grad)."""
    return torch.inference_mode(pass_of(p) == "fwd")


def validate(ctx: Context, case: str, p: dict):
    """Build the call, run it once (output checked, peak memory measured): (call, metrics).
    A backward pass first runs its forward (``PointCall.prepare_backward``): no backward -> Skip."""
    prof = ctx.profile.scaling
    if case == "lstm" and prof.lstm_max_n and p["n"] > prof.lstm_max_n:
        raise Skip(f"lstm is swept up to n={prof.lstm_max_n} in this profile")
    with _forward_only(p):
        call = make_call(ctx, case, p)
        try:
            if pass_of(p) != "fwd":
                why = call.prepare_backward()
                if why is not None:
                    raise Skip(why)
            out, mem = call.validate(ctx.device, getattr(ctx.profile, "mem_repeats", 1),
                                     getattr(ctx.profile, "mem_budget_s", None))
        except RuntimeError as exc:
            if "No available kernel" in str(exc):
                raise Skip(f"torch SDPA backend cannot run these inputs: {str(exc).splitlines()[0][:200]}") from None
            raise
        if pass_of(p) != "fwd":  # out: what is wrong with the gradients (checked where they are)
            if out is not None:
                kind, _, text = out.partition(": ")
                raise (NonFinite(f"{case} {PASS_WORDS[pass_of(p)]}: {text}") if kind == "nan"
                       else RuntimeError(f"{case} {PASS_WORDS[pass_of(p)]}: {text}"))
            return call, mem
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


def _cpu_sweep(ctx: Context, case: str, pass_: str) -> dict:
    """Time all of ``case``'s pending sizes of ``pass_`` together, interleaved
    (harness.bench.sweep); each size is recorded (``ctx.record``) as soon as its timing is over."""
    sweeps = ctx.state.setdefault("sweeps", {})
    if (case, pass_) not in sweeps:
        found = sweeps[(case, pass_)] = {}  # filled size by size: ``measure`` reads it when recording
        pending = [p for p in ctx.state["case_params"][(case, pass_)] if ctx.store is None or not
                   ctx.store.is_done(point_key(SUITE, case, p, role_of(case), ctx.impl))]
        slots = [Slot(p["n"], functools.partial(validate, ctx, case, p)) for p in pending]
        points = ctx.state.get("points", {})

        def done(slot: Slot, result) -> None:
            found[slot.n] = (result, slot.metrics)
            if ctx.record is not None and (case, pass_, slot.n) in points:
                ctx.record(points[(case, pass_, slot.n)])

        with torch.inference_mode(pass_ == "fwd"):
            budget = ctx.state.setdefault("spread_budget", {"left_s": ctx.profile.scaling.spread_budget_s})
            run_sweep(slots, ctx.profile.scaling, Skip, note=note, deadline=ctx.state.get("deadline"),
                      on_done=done, budget=budget)
    return sweeps[(case, pass_)]


def _swept(ctx: Context, case: str, pass_: str = "fwd") -> bool:
    """The case's CPU sweep of ``pass_`` has run (its sizes are measured, only to be recorded)."""
    return (case, pass_) in ctx.state.get("sweeps", {})


def measure(ctx: Context, case: str, p: dict) -> dict:
    if torch.device(ctx.device).type != "cuda":
        timing, extra = _cpu_sweep(ctx, case, pass_of(p))[p["n"]]
        if isinstance(timing, BaseException):
            raise timing
        return _metrics(ctx, case, p, timing, extra)
    # CUDA: one point at a time (a dedicated device; CUDA events, L2 flushed per repetition)
    prof = ctx.profile.scaling
    slow = ctx.state.setdefault("slow", {})
    if (case, pass_of(p)) in slow:
        raise Skip(slow[(case, pass_of(p))])
    call, extra = validate(ctx, case, p)
    timing = timing_of(call, ctx.device, rep_ms=prof.rep_ms, warmup_ms=prof.warmup_ms,
                       max_run_s=prof.max_run_s)
    nxt = [n for n in prof.sizes_of(pass_of(p)) if n > p["n"]]
    if nxt and timing.median_s * (nxt[0] / p["n"]) ** 2 > prof.max_call_s:
        slow[(case, pass_of(p))] = (f"{SIZE_CAP_REASON}: predicted {timing.median_s * (nxt[0] / p['n']) ** 2:.2f} s "
                      f"per call at n={nxt[0]} (n^2 from {timing.median_s:.3f} s at n={p['n']}), over the "
                      f"profile's per-call budget of {prof.max_call_s:g} s; larger sizes not measured")
    return _metrics(ctx, case, p, timing, extra)


def passes_of(ctx: Context) -> tuple[str, ...]:
    """The passes this run times: the profile's ``passes`` (``bench --passes`` replaces them)."""
    return tuple(getattr(ctx.profile.scaling, "passes", PASSES))


def points(ctx: Context) -> list[Point]:
    """Pass by pass (every case's forward first), case by case, size by size."""
    prof = ctx.profile.scaling
    out = []
    case_params = ctx.state.setdefault("case_params", {})
    by_size = ctx.state.setdefault("points", {})
    ctx.state.pop("sweeps", None)
    for pass_ in passes_of(ctx):
        for case in CASES:
            if not ctx.wants(case):
                continue
            case_params[(case, pass_)] = [params_for(case, n, prof, ctx.device, pass_)
                                          for n in prof.sizes_of(pass_)]
            for p in case_params[(case, pass_)]:
                out.append(Point(SUITE, case, p, functools.partial(measure, ctx, case, p),
                                 measured=functools.partial(_swept, ctx, case, pass_), role=role_of(case)))
                by_size[(case, pass_, p["n"])] = out[-1]
    return out


def fits(rows: list[dict]) -> dict:
    """fits.json's scaling entries: one per case and pass (``harness.bench.fit.fits_from_rows``)."""
    return fits_from_rows(rows, SUITE)


def _check_name(case: str, pass_: str) -> str:
    return f"scaling exponent of {case}" + ("" if pass_ == "fwd" else f" ({PASS_WORDS[pass_]})")


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    """Per pass: the reference kernels' exponents judged against ``EXPECTED`` (a backward has the
    forward's asymptotics), every other fitted exponent informational."""
    found = fits(rows)
    checks = []
    for pass_ in passes_of(ctx):
        for case, want in EXPECTED.items():
            if not ctx.wants(case):
                continue
            name, f = _check_name(case, pass_), found.get(fit_key(SUITE, case, pass_))
            if ctx.profile.name == "tiny":  # sizes too small for asymptotics: report, do not judge
                checks.append(Check(name, None, f"{f['exponent']:.3f} (tiny profile: not judged)" if f else "no fit"))
                continue
            if f is None:
                checks.append(Check(name, None, "no fit (too few ok points)"))
                continue
            ok = abs(f["exponent"] - want) <= TOLERANCE
            ci = f["ci95"]
            ci_text = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "n/a"
            checks.append(Check(name, ok,
                                f"{f['exponent']:.3f} (95% CI {ci_text}, n {f['n_range'][0]}..{f['n_range'][1]}); "
                                f"expected {want} +- {TOLERANCE}"))
    for key, f in sorted(found.items()):
        case = f.get("case") or key.split("|")[1]
        if case not in EXPECTED and math.isfinite(f["exponent"]):
            checks.append(Check(_check_name(case, f.get("pass", "fwd")), None,
                                f"{f['exponent']:.3f} (informational)"))
    return checks
