"""Packing: tokens/s of packed documents (``attention_varlen``) against the same documents padded.

A training batch of D documents whose lengths follow a realistic mix: a seeded log-normal (median
``median``, log-space sigma ``sigma``, clipped to 1 ... ``max_len``; fine-tuning sets and
pretraining shards both have this long right tail). Two cases, both the target's code (role "target"):

  target.varlen_packed   the target's attention_varlen on the documents packed into one row:
                         q, k, v (T, H, E), T = sum of the lengths, cu_seqlens of the lengths, causal
  target.sdpa_padded     the target's scaled_dot_product_attention on the documents padded to the
                         longest: q, k, v (D, H, Lmax, E) with a boolean mask (causal, and the keys
                         past each document's length masked), as a batch without packing runs

Measured (``time_cpu`` on a CPU, CUDA events on a GPU, in the target's worker):

  tokens               T, the real tokens; padded_tokens = D * Lmax; padding_fraction = 1 - T / (D * Lmax)
  tokens_per_s         T / the median time of one call (both cases count the real tokens only)
  work_ratio           the attention work padding does over packing's, D * Lmax^2 / sum(L_b^2)
                       (score entries; causal halves both alike): what packing can save at most
  flops                useful forward FLOPs, 2 * 2 * H * E * sum(L_b (L_b + 1) / 2): the same for both

The summary reports packed over padded tokens/s next to work_ratio (no pass/fail: a kernel may
spend its time elsewhere than on scores, e.g. the reference's per-sequence loop).
"""
from __future__ import annotations

import functools
import math

import torch

from harness.bench import Check, Context
from harness.bench.on_target import point_call, timing_of
from harness.bench.points import Point, check_finite
from harness.boundary.handles import named

SUITE = "packing"
CASES = ("target.varlen_packed", "target.sdpa_padded")


def lengths(p: dict) -> list[int]:
    """The documents' lengths: a seeded log-normal mix (module doc), clipped to 1 ... max_len."""
    gen = torch.Generator().manual_seed(p["seed"])
    z = torch.randn(p["docs"], generator=gen, dtype=torch.float64)
    raw = torch.exp(math.log(p["median"]) + p["sigma"] * z)
    return [int(min(p["max_len"], max(1, round(float(x))))) for x in raw]


def packed_inputs(p: dict, device: str) -> tuple:
    """(q, k, v, cu_seqlens, cu_seqlens, max_len, max_len) of the packed documents."""
    lens = lengths(p)
    gen = torch.Generator().manual_seed(p["seed"] + 1)
    T, dtype = sum(lens), getattr(torch, p["dtype"])
    q, k, v = (torch.randn(T, p["heads"], p["head_dim"], generator=gen).to(dtype).to(device) for _ in range(3))
    cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device=device)
    return q, k, v, cu, cu, max(lens), max(lens)


def padded_inputs(p: dict, device: str) -> tuple:
    """(q, k, v, attn_mask) of the documents padded to the longest: (D, H, Lmax, E) and (D, 1, Lmax, Lmax)."""
    lens = lengths(p)
    D, L = len(lens), max(lens)
    gen = torch.Generator().manual_seed(p["seed"] + 1)
    dtype = getattr(torch, p["dtype"])
    q, k, v = (torch.randn(D, p["heads"], L, p["head_dim"], generator=gen).to(dtype).to(device) for _ in range(3))
    j = torch.arange(L, device=device)
    valid = j[None, :] < torch.tensor(lens, device=device)[:, None]          # (D, Lmax) real keys
    causal = j[None, :] <= j[:, None]                                         # (Lmax, Lmax)
    mask = (causal[None] & valid[:, None, :])[:, None]                        # (D, 1, Lmax, Lmax)
    return q, k, v, mask


def figures(p: dict) -> dict:
    lens = lengths(p)
    T, D, L = sum(lens), len(lens), max(lens)
    return {"tokens": T, "padded_tokens": D * L, "padding_fraction": 1 - T / (D * L),
            "work_ratio": D * L * L / sum(n * n for n in lens),
            "flops": 4.0 * p["heads"] * p["head_dim"] * sum(n * (n + 1) / 2 for n in lens)}


def measure(ctx: Context, case: str, p: dict) -> dict:
    prof = ctx.profile.scaling
    if case == "target.varlen_packed":
        fn, make, kwargs, name = ctx.require("attention_varlen"), packed_inputs, {"causal": True}, "attention_varlen"
    else:
        fn, make, kwargs, name = ctx.require("scaled_dot_product_attention"), padded_inputs, {}, \
            "scaled_dot_product_attention"
    call = named(ctx.on_target(point_call, fn, make, p, ctx.device, (), kwargs), name)
    out, mem = call.validate(ctx.device, getattr(ctx.profile, "mem_repeats", 1),
                             getattr(ctx.profile, "mem_budget_s", None))
    check_finite(out, f"{case} output")
    timing = timing_of(call, ctx.device, min_block_s=prof.min_block_s, min_run_s=prof.min_run_s,
                       min_blocks=prof.min_blocks, max_run_s=prof.max_run_s, rep_ms=prof.rep_ms,
                       warmup_ms=prof.warmup_ms)
    fig = figures(p)
    return {**timing.metrics(), **mem, **fig, "tokens_per_s": fig["tokens"] / timing.median_s}


def params_of(ctx: Context) -> dict:
    prof = ctx.profile.packing
    return {"docs": prof.docs, "median": prof.median, "sigma": prof.sigma, "max_len": prof.max_len,
            "heads": prof.heads, "head_dim": prof.head_dim, "dtype": prof.dtype, "seed": prof.seed}


def points(ctx: Context) -> list[Point]:
    p = params_of(ctx)
    return [Point(SUITE, case, p, functools.partial(measure, ctx, case, p), role="target")
            for case in CASES if ctx.wants(case)]


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    ok = {r["case"]: r["metrics"] for r in rows if r["suite"] == SUITE and r["status"] == "ok"}
    if len(ok) < 2:
        return [Check("packed vs padded tokens/s", None, f"measured: {', '.join(ok) or 'none'}")]
    packed, padded = ok["target.varlen_packed"], ok["target.sdpa_padded"]
    return [Check("packed vs padded tokens/s", True,
                  f"packed {packed['tokens_per_s']:.4g}, padded {padded['tokens_per_s']:.4g} tokens/s "
                  f"(x{packed['tokens_per_s'] / padded['tokens_per_s']:.3g}); padding {padded['padding_fraction']:.0%} "
                  f"of {padded['padded_tokens']} slots, score work x{padded['work_ratio']:.3g}")]
