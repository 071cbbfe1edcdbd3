"""Receptive field of stacked sliding-window layers, measured by gradients.

For a stack of L layers with a window of w keys (query i sees i - w < j <= i), the
last token's output depends on exactly the last L * (w - 1) + 1 input positions
(L * w + 1 under FlashAttention's w + 1 convention). We measure it: float64, seeded
random weights, y = stack(x); the gradient of <y[last], r> (r a random vector)
w.r.t. the input embeddings x is exactly zero outside the receptive field (masked
scores get probability exactly 0, and every other op is per position) and nonzero
inside it (with probability 1). ``receptive_field`` = number of positions with a
nonzero gradient; the row records it, the formula for the window convention in
force, and ``match`` (measured == formula).

Cases: mistral_block (reference block, dense-mask reference window math),
banded_window (the same block on harness.bench.models.banded), target.sliding_window (the
block on the target's sliding_window_attention; formula for its declared
``window_extent``, default w) and hf_mistral (transformers' MistralModel with
sliding_window=w, on the target's SDPA through AttentionInterface; HF's convention is w
keys). target.sliding_window and hf_mistral run the target's code (role "target"): a target
without the name they need gets them skipped with the reason, never run on torch's kernel
under its label; the other two cases are the harness's comparison kernels. The target's
cases build their stack and take the gradient inside the target's worker process
(``case_profile`` through ``Context.on_target``, under the per-call limit): autograd does not
cross a process boundary.

``receptive_field_grad.csv`` (depth, distance, grad_norm) holds the heatmap of the
target's kernel (target.sliding_window) when it ran, else of mistral_block;
``receptive_field_grad_by_case.csv`` adds a ``case`` column with every case.
"""
from __future__ import annotations

import csv
import functools
from pathlib import Path

import torch

from harness.bench import Check, Context, failed_points, uncompared
from harness.bench.points import Point, Skip, check_finite
from harness.verdicts.runfolder import grad_case
from harness.bench.models import registry

SUITE = "receptive_field"
CASES = ("mistral_block", "banded_window", "target.sliding_window", "hf_mistral")
#: the cases that run the target's code (role "target")
TARGET_CASES = ("target.sliding_window", "hf_mistral")


def formula(depth: int, window: int, extent: str = "w") -> int:
    """Positions the last token sees through ``depth`` layers of ``window``."""
    if extent == "w+1":
        return depth * window + 1
    return depth * (window - 1) + 1


def extent_of(case: str, ctx: Context) -> str:
    if case == "target.sliding_window":
        return ctx.target.conventions.get("window_extent", "w")
    return "w"


def _model(case: str, p: dict, device: str, component=None):
    """The stack of ``case``; ``component`` is the target's sliding_window_attention (for
    target.sliding_window) or scaled_dot_product_attention (hf_mistral)."""
    common = dict(depth=p["depth"], dim=p["dim"], heads=p["heads"], kv_heads=p["kv_heads"],
                  window=p["window"], dtype=torch.float64, device=device)
    if case == "mistral_block":
        return registry.create("mistral_block", **common)
    if case == "banded_window":
        banded = registry.create("banded_window", window=p["window"])
        return registry.create("mistral_block", **common,
                               sliding_window=lambda q, k, v, w, scale=None: banded(q, k, v, scale=scale))
    if case == "target.sliding_window":
        return registry.create("mistral_block", **common, sliding_window=component)
    if case == "hf_mistral":
        config = dict(vocab_size=16, hidden_size=p["dim"], intermediate_size=2 * p["dim"],
                      num_hidden_layers=p["depth"], num_attention_heads=p["heads"],
                      max_position_embeddings=max(256, p["n"]))
        model = registry.create("hf_mistral", window=p["window"], sdpa=component,
                                num_key_value_heads=p["kv_heads"], config=config,
                                device=device, dtype=torch.float64)
        return lambda x: model.model(inputs_embeds=x).last_hidden_state
    raise ValueError(f"unknown receptive-field case {case!r}")


def case_profile(case: str, p: dict, device: str, component=None) -> torch.Tensor:
    """``grad_profile`` of ``case``'s stack: for the target's cases this runs in its worker
    (``Context.on_target``), since the gradient flows through the target's code."""
    with torch.enable_grad():
        return grad_profile(_model(case, p, device, component), p["n"], p["dim"], device)


def grad_profile(model, n: int, dim: int, device, seed: int = 0) -> torch.Tensor:
    """||d <y[-1], r> / d x[j]|| for j = 0..n-1, as a float64 CPU tensor of length n."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(1, n, dim, generator=gen, device=device, dtype=torch.float64, requires_grad=True)
    r = torch.randn(dim, generator=gen, device=device, dtype=torch.float64)
    y = model(x)
    check_finite(y, "stack output")
    (y[0, -1] @ r).backward()
    return x.grad[0].norm(dim=-1).detach().cpu()


def measure(ctx: Context, case: str, p: dict) -> dict:
    if case == "target.sliding_window":
        g = ctx.on_target(case_profile, case, p, ctx.device, ctx.require("sliding_window_attention"))
    elif case == "hf_mistral":
        from harness.adapters.hf_attention_interface import hf_available
        why = hf_available()
        if why:
            raise Skip(why)
        sdpa = ctx.require("scaled_dot_product_attention")  # Skip without it: never torch's instead
        g = ctx.on_target(case_profile, case, p, ctx.device, sdpa)
    else:
        g = case_profile(case, p, ctx.device)
    n = p["n"]
    by_distance = [float(g[n - 1 - d]) for d in range(n)]  # distance 0 = the last token itself
    seen = [d for d, v in enumerate(by_distance) if v != 0.0]
    measured = len(seen)
    extent = extent_of(case, ctx)
    expect = formula(p["depth"], p["window"], extent)
    matches = {e: formula(p["depth"], p["window"], e) == measured for e in ("w", "w+1")}
    return {"receptive_field": measured, "formula": expect, "match": measured == expect,
            "window_extent": extent,
            "measured_extent": next((e for e, ok in matches.items() if ok), None),
            "max_distance": max(seen) if seen else None,
            "contiguous": seen == list(range(measured)),
            "grad_norm_by_distance": by_distance}


def points(ctx: Context) -> list[Point]:
    prof = ctx.profile.receptive_field
    if prof.n <= formula(max(prof.depths), prof.window, "w+1"):
        raise ValueError(f"receptive_field: n={prof.n} must exceed the largest receptive field")
    out = []
    for case in CASES:
        if not ctx.wants(case):
            continue
        for depth in prof.depths:
            p = {"depth": depth, "window": prof.window, "n": prof.n, "dim": prof.dim,
                 "heads": prof.heads, "kv_heads": prof.kv_heads, "dtype": "float64"}
            out.append(Point(SUITE, case, p, functools.partial(measure, ctx, case, p),
                             role="target" if case in TARGET_CASES else "comparison"))
    return out


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    checks = []
    for case in CASES:
        rs = [r for r in rows if r["suite"] == SUITE and r["case"] == case]
        ok, failed = [r for r in rs if r["status"] == "ok"], failed_points(rs)
        depth = lambda r: f"depth {r['params']['depth']}"  # noqa: E731
        if not ok:
            if rs:
                checks.append(Check(f"receptive field of {case}", False if failed else None,
                                    "nothing measured" + uncompared(rs, depth)))
            continue
        bad = [r for r in ok if not r["metrics"]["match"]]
        depths = sorted(r["params"]["depth"] for r in ok)
        ext = ok[0]["metrics"]["window_extent"]
        detail = (f"measured == formula ({'L*(w-1)+1' if ext == 'w' else 'L*w+1'}, w={ok[0]['params']['window']}) "
                  f"at depths {depths[0]}..{depths[-1]}")
        if bad:
            detail = "; ".join(f"depth {r['params']['depth']}: measured {r['metrics']['receptive_field']} != "
                               f"formula {r['metrics']['formula']} (measured extent "
                               f"{r['metrics']['measured_extent']})" for r in bad[:3])
        # a skipped depth (the time budget) is left out, never counted as a mismatch
        checks.append(Check(f"receptive field of {case}", not bad and not failed, detail + uncompared(rs, depth)))
    return checks


def write_grad_csv(run_dir, rows: list[dict]) -> list[Path]:
    """receptive_field_grad.csv (depth, distance, grad_norm) and the by-case table."""
    rs = [r for r in rows if r["suite"] == SUITE and r["status"] == "ok"
          and "grad_norm_by_distance" in (r.get("metrics") or {})]
    if not rs:
        return []
    primary = grad_case(r["case"] for r in rs)
    run_dir = Path(run_dir)
    main_path, all_path = run_dir / "receptive_field_grad.csv", run_dir / "receptive_field_grad_by_case.csv"
    order = sorted(rs, key=lambda r: (CASES.index(r["case"]) if r["case"] in CASES else 99, r["params"]["depth"]))
    with open(main_path, "w", newline="") as fm, open(all_path, "w", newline="") as fa:
        wm, wa = csv.writer(fm), csv.writer(fa)
        wm.writerow(["depth", "distance", "grad_norm"])
        wa.writerow(["case", "depth", "distance", "grad_norm"])
        for r in order:
            for dist, g in enumerate(r["metrics"]["grad_norm_by_distance"]):
                wa.writerow([r["case"], r["params"]["depth"], dist, repr(float(g))])
                if r["case"] == primary:
                    wm.writerow([r["params"]["depth"], dist, repr(float(g))])
    return [main_path, all_path]
