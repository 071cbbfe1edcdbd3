"""KV cache, paged vs linear (case ``paged`` of the ``kv_cache`` suite): the bytes each holds at a
given fill, by formula and measured, and one decode step of the target's ``attention_with_kvcache``
on each.

B items of a batch with at most S positions (a linear cache reserves S slots per item) hold
lengths spread evenly around ``fill`` * S (item b: round(2 fill (b + 1/2) / B * S), between 1 and
S - 1), then one decode step adds a token to each: n_b = length_b + 1 positions after it. With
Hkv KV heads of E dims, block_size bs and itemsize s bytes, per layer:

  linear_formula_bytes  2 * B * Hkv * S * E * s                   (every item reserves S slots)
  cache_formula_bytes   2 * sum_b ceil(n_b / bs) * Hkv * bs * E * s  (the pool: the pages in use)
  tokens_bytes          2 * sum_b n_b * Hkv * E * s               (what is cached; the paged pool's
                        waste over it, the last pages' unfilled slots, is <= 2 * B * Hkv * (bs - 1) * E * s)
  table_bytes           B * ceil(S / bs) * 4                      (the int32 block table)

Measured in the target's worker (``Context.on_target``): the nbytes of the linear caches
(``linear_cache_bytes``) and of the pool (``cache_bytes``), each equal to its formula
(``linear_match``, ``match``); ``paged_vs_linear`` = cache_bytes / linear_cache_bytes, against
``fill_after`` = sum n_b / (B S); the peak memory of the decode step on the pool
(``peak_mem_*``, harness.bench.memory) and on the linear caches (``linear_peak_mem_bytes``): a
kernel that gathers the pages into a linear copy gives the savings back there; the step's time
(``time_s``, the median over at least ``TIME_STEPS`` steps, the memory repeats included).
``decode_parity``: the paged step's outputs against the float64 reference over the linear cache (tolerance policy, naive yardstick: the same
math in the profile's dtype), and ``linear_parity`` the linear step's. The pages are handed out
round-robin over the items (as an allocator serving a batch that decodes together does), so no
item's pages are contiguous. A target without paging (declared, or no ``block_table`` parameter)
gets the point skipped with the reason.
"""
from __future__ import annotations

import math
import statistics
import time

import torch

from harness.bench import Check, Context
from harness.bench.memory import peak_memory_repeated
from harness.bench.points import Point, Skip, check_finite

SUITE, CASE = "kv_cache", "paged"
#: timed decode steps on the pool at least (the memory repeats count): time_s, its IQR and
#: time_samples_s are over them (each step is the same call on the same cache: homogeneous)
TIME_STEPS = 5


def lengths_at(batch: int, max_seq: int, fill: float) -> list[int]:
    """Cached lengths before the step, spread evenly around fill * max_seq (1 ... max_seq - 1)."""
    return [min(max_seq - 1, max(1, round(2 * fill * (b + 0.5) / batch * max_seq))) for b in range(batch)]


def formulas(p: dict, lens: list[int], itemsize: int) -> dict:
    """The byte counts of the module docstring for lengths ``lens`` after the step."""
    H, E, S, bs, B = p["kv_heads"], p["head_dim"], p["max_seq"], p["block_size"], p["batch"]
    pages = sum(math.ceil(n / bs) for n in lens)
    return {"linear_formula_bytes": 2 * B * H * S * E * itemsize,
            "cache_formula_bytes": 2 * pages * H * bs * E * itemsize,
            "tokens_bytes": 2 * sum(lens) * H * E * itemsize, "table_bytes": B * math.ceil(S / bs) * 4,
            "pages": pages, "waste_bound_bytes": 2 * B * H * (bs - 1) * E * itemsize}


def inputs(p: dict, lens: list[int], device="cpu") -> dict:
    """The step's tensors, the same wherever they are built: the linear caches (B, Hkv, S, E)
    holding each item's first lens[b] positions, the pool (pages, Hkv, bs, E) holding the same
    through the table (pages round-robin over the items), q and the new k, v."""
    g = torch.Generator().manual_seed(0)
    dt = getattr(torch, p["dtype"])
    B, H, Hq, E, S, bs = p["batch"], p["kv_heads"], p["heads"], p["head_dim"], p["max_seq"], p["block_size"]
    need = [math.ceil((n + 1) / bs) for n in lens]
    table = torch.zeros(B, math.ceil(S / bs), dtype=torch.int32)
    nxt = 0
    for j in range(max(need)):  # round-robin: page j of every item that needs one, in turn
        for b in range(B):
            if j < need[b]:
                table[b, j], nxt = nxt, nxt + 1
    lin = [torch.zeros(B, H, S, E, dtype=dt) for _ in range(2)]
    pool = [torch.zeros(nxt, H, bs, E, dtype=dt) for _ in range(2)]
    for b, n in enumerate(lens):
        for cache, paged in zip(lin, pool):
            vals = torch.randn(H, n, E, generator=g).to(dt)
            cache[b, :, :n] = vals
            pos = torch.arange(n)
            paged[table[b, pos // bs].long(), :, pos % bs] = vals.transpose(0, 1)
    new = [torch.randn(B, n_h, 1, E, generator=g).to(dt) for n_h in (Hq, H, H)]
    out = {"linear": lin, "pool": pool, "table": table, "q": new[0], "k": new[1], "v": new[2],
           "seqlens": torch.tensor(lens, dtype=torch.int32)}
    return {k: [t.to(device) for t in v] if isinstance(v, list) else v.to(device) for k, v in out.items()}


def step_run(fn, p: dict, lens: list[int], device: str, mem_repeats: int = 1, mem_budget_s: float | None = None):
    """In the target's worker: one decode step on the linear caches and on the pool, each with its
    peak memory measured (the step rewrites the same slot with the same token, so repeats agree)."""
    x = inputs(p, lens, device)
    res = {"linear_cache_bytes": sum(t.nbytes for t in x["linear"]),
           "cache_bytes": sum(t.nbytes for t in x["pool"]), "table_nbytes": x["table"].nbytes}
    steps: list[float] = []

    def step(caches, **kw):
        def call():
            start = time.perf_counter()
            out = fn(x["q"], *caches, k=x["k"], v=x["v"], cache_seqlens=x["seqlens"], **kw)
            if device != "cpu":
                torch.cuda.synchronize()
            steps.append(time.perf_counter() - start)
            return out
        return call
    with torch.inference_mode():
        res["linear_out"], lin_mem = peak_memory_repeated(step(x["linear"]), device, mem_repeats, mem_budget_s)
        del steps[:]
        paged = step(x["pool"], block_table=x["table"])
        res["out"], mem = peak_memory_repeated(paged, device, mem_repeats, mem_budget_s)
        while len(steps) < TIME_STEPS:
            paged()
    res["linear_out"], res["out"] = res["linear_out"].cpu(), res["out"].cpu()
    return {**res, **mem, "linear_peak_mem_bytes": lin_mem["peak_mem_bytes"], "steps": steps}


def parity(p: dict, lens: list[int], out: torch.Tensor) -> dict:
    """``out`` against the float64 reference over the linear cache (tolerance policy)."""
    from harness.spec import tolerance
    from harness.reference.kvcache import kvcache_math
    x = inputs(p, lens)
    args = (x["q"], x["linear"][0], x["linear"][1], x["k"], x["v"])
    truth = kvcache_math(*args, cache_seqlens=x["seqlens"])[0]
    naive = kvcache_math(*args, cache_seqlens=x["seqlens"], compute_dtype=x["q"].dtype)[0]
    return tolerance.compare(out, truth, naive, dtype=x["q"].dtype)


def measure(ctx: Context, p: dict) -> dict:
    from harness.runner import Unsupported, require_features
    fn = ctx.require("attention_with_kvcache")  # Skip without it
    try:
        require_features(ctx.target, "kvcache_paged", p["dtype"])
    except Unsupported as exc:
        raise Skip(f"unsupported ({exc})") from None
    lens = lengths_at(p["batch"], p["max_seq"], p["fill"])
    res = ctx.on_target(step_run, fn, p, lens, ctx.device, getattr(ctx.profile, "mem_repeats", 1),
                        getattr(ctx.profile, "mem_budget_s", None))
    check_finite(res["out"], "paged decode step")
    after = [n + 1 for n in lens]
    itemsize = torch.empty(0, dtype=getattr(torch, p["dtype"])).element_size()
    f = formulas(p, after, itemsize)
    paged_cmp, linear_cmp = parity(p, lens, res["out"]), parity(p, lens, res["linear_out"])
    steps = res["steps"]
    q1, _, q3 = statistics.quantiles(steps, n=4, method="inclusive") if len(steps) > 1 else (steps[0],) * 3
    mem = {k: v for k, v in res.items() if k.startswith("peak_mem_")}
    return {"cache_bytes": res["cache_bytes"], **f, "match": res["cache_bytes"] == f["cache_formula_bytes"],
            "linear_cache_bytes": res["linear_cache_bytes"],
            "linear_match": res["linear_cache_bytes"] == f["linear_formula_bytes"],
            "table_match": res["table_nbytes"] == f["table_bytes"],
            "paged_vs_linear": res["cache_bytes"] / res["linear_cache_bytes"],
            "fill_after": sum(after) / (p["batch"] * p["max_seq"]), "lengths_after": after,
            **mem, "linear_peak_mem_bytes": res["linear_peak_mem_bytes"],
            "time_s": statistics.median(steps), "time_iqr_s": q3 - q1, "time_min_s": min(steps),
            "repeats": len(steps), "time_samples_s": steps, "tokens_per_s": p["batch"] * len(steps) / sum(steps),
            "decode_max_abs_error": paged_cmp.max_error, "decode_allowed_error": paged_cmp.allowed,
            "decode_naive_error": paged_cmp.naive_error, "decode_parity": bool(paged_cmp.ok),
            "linear_parity": bool(linear_cmp.ok)}


def points(ctx: Context) -> list[Point]:
    if not ctx.wants(CASE):
        return []
    prof = ctx.profile.kv_cache
    p = {"batch": prof.paged_batch, "heads": prof.heads, "kv_heads": max(1, prof.heads // 4), "head_dim": prof.head_dim,
         "max_seq": prof.paged_max_seq, "block_size": prof.block_size, "fill": prof.fill, "dtype": prof.dtype}
    return [Point(SUITE, CASE, p, lambda: measure(ctx, p), role="target")]


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    ok = [r for r in rows if r["suite"] == SUITE and r["case"] == CASE and r["status"] == "ok"]
    checks = []
    for r in ok:
        m, p = r["metrics"], r["params"]
        checks.append(Check("paged cache bytes == formula, below the linear cache's",
                            bool(m["match"] and m["linear_match"] and m["cache_bytes"] < m["linear_cache_bytes"]),
                            f"fill {m['fill_after']:.3g}, block {p['block_size']}: paged {m['cache_bytes']} B "
                            f"(formula {m['cache_formula_bytes']}), linear {m['linear_cache_bytes']} B "
                            f"(formula {m['linear_formula_bytes']}), ratio {m['paged_vs_linear']:.3g}"))
        checks.append(Check("paged decode step == float64 reference (tolerance policy)",
                            bool(m["decode_parity"] and m["linear_parity"]),
                            f"max error {m['decode_max_abs_error']:.3g} (allowed {m['decode_allowed_error']:.3g})"))
    return checks
