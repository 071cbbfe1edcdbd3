"""KV cache: bytes held by MHA / GQA / MQA and rolling-window decoders, and decode speed.

A small Hugging Face Llama (``registry "hf_llama"``, random weights, no hub) with H
query heads and num_key_value_heads = H (mha), H/2 and H/4 (gqa), 1 (mqa) runs a
prompt of P tokens and then N greedy decode steps on a ``DynamicCache``; attention
runs on the target's SDPA through ``AttentionInterface``, so every case is the target's
(role "target"). A target without ``scaled_dot_product_attention`` gets its points skipped
with that reason: torch's SDPA is never run under the target's label. The model is built, and
decodes, inside the target's worker process (``decode_run`` through ``Context.on_target``, under
the per-call limit), so the decode steps are timed and the memory measured where its code runs.
Measured:

  cache_bytes          sum over layers of keys.nbytes + values.nbytes after the run
  cache_formula_bytes  2 * layers * kv_heads * head_dim * seq * batch * bytes_per_element,
                       seq = P + N (every token fed to the model is cached)
  match                cache_bytes == cache_formula_bytes, exactly
  cache_ratio_vs_mha   cache_bytes / mha's cache_bytes, and head_ratio = kv_heads / H
                       (ratio_match: equal, compared exactly in integers)
  tokens_per_s         batch * N / total decode time over the steps of every run (the memory
                       repeats decode the same tokens again; at least ``TIME_RUNS`` runs)
  time_s               the median over runs of a run's mean decode step; time_iqr_s and
                       time_samples_s are over the runs (the repeat-to-repeat spread the gate
                       reads); step_time_median_s the median single step
  peak_mem_bytes       the device's peak during prefill + decode, the median of up to the
                       profile's ``mem_repeats`` runs, with min/max (harness.bench.memory)

  decode_max_abs_error the decoded logits (prefill + N steps on the cache) against one full
                       forward over the same tokens without a cache: max |decoded - truth|, the truth
                       the same model and weights in float64 (torch's SDPA); decode_allowed_error is
                       the tolerance policy's allowance (naive yardstick: that full forward in the
                       profile's dtype), decode_naive_error its naive error, and decode_parity
                       (pass/fail) whether the error is within it

paged: the bytes of a paged pool and of a linear cache at a given fill, with their formulas, and
one decode step of the target's attention_with_kvcache on each (``harness.bench.kv_cache_paged``).

rolling_window: a Mistral config with sliding_window = w; transformers 5.x gives
``DynamicCache(config=...)`` one DynamicSlidingWindowLayer per layer, which keeps
the last w - 1 tokens (the w-th key is the token being decoded), so the formula uses
seq = min(P + N, w - 1) and ``cache_bytes_max`` (the maximum over all steps) shows
the cap holds throughout. ``cache_storage_bytes`` counts the distinct storages
behind the cached tensors (a sliding layer's cache is a view into the last
concatenation, so it can hold one token more than its nbytes).
"""
from __future__ import annotations

import functools
import inspect
import statistics
import time

import torch

from harness.bench import Check, Context, failed_points, kv_cache_paged, uncompared
from harness.bench.memory import peak_memory_repeated
from harness.bench.points import Point, Skip, check_finite
from harness.bench.timer import synchronize
from harness.bench.models import registry

#: timed decode runs per point at least (the memory repeats count): the spread is over runs
TIME_RUNS = 5

SUITE = "kv_cache"
#: every case decodes on the target's SDPA: all are the target's (role "target")
TARGET_CASES = ("mha", "gqa", "mqa", "rolling_window", kv_cache_paged.CASE)


def kv_variants(heads: int) -> list[tuple[str, int]]:
    """(case, kv_heads): mha H, gqa H/2 and H/4, mqa 1 (duplicates dropped)."""
    out, seen = [], set()
    for case, kv in (("mha", heads), ("gqa", heads // 2), ("gqa", heads // 4), ("mqa", 1)):
        if kv >= 1 and heads % kv == 0 and kv not in seen:
            seen.add(kv)
            out.append(("mqa" if kv == 1 else "mha" if kv == heads else case, kv))
    return out


def cache_formula(layers: int, kv_heads: int, head_dim: int, seq: int, batch: int, itemsize: int) -> int:
    return 2 * layers * kv_heads * head_dim * seq * batch * itemsize


def cache_bytes(cache) -> tuple[int, int, int]:
    """(sum of nbytes, bytes of distinct storages, cached sequence length of layer 0)."""
    total, storages, seq = 0, {}, 0
    for i, layer in enumerate(cache.layers):
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor) and t.numel():
                total += t.nbytes
                s = t.untyped_storage()
                storages[s.data_ptr()] = s.nbytes()
        if i == 0 and isinstance(getattr(layer, "keys", None), torch.Tensor):
            seq = layer.keys.shape[-2]
    return total, sum(storages.values()), seq


def _model(case: str, p: dict, device: str, sdpa):
    config = dict(vocab_size=p["vocab"], hidden_size=p["heads"] * p["head_dim"],
                  intermediate_size=p["intermediate"], num_hidden_layers=p["layers"],
                  num_attention_heads=p["heads"], head_dim=p["head_dim"],
                  max_position_embeddings=max(4096, p["prompt"] + p["new_tokens"]))
    common = dict(sdpa=sdpa, num_key_value_heads=p["kv_heads"], config=config,
                  device=device, dtype=getattr(torch, p["dtype"]))
    if case == "rolling_window":
        return registry.create("hf_mistral", window=p["window"], **common)
    return registry.create("hf_llama", **common)


def decode_run(case: str, p: dict, device: str, sdpa, mem_repeats: int = 1,
               mem_budget_s: float | None = None) -> dict:
    """Build ``case``'s model on the target's ``sdpa`` and decode with peak memory measured:
    runs in the target's worker (``Context.on_target``), so steps are timed and memory is
    measured where the target's code runs. Returns plain data."""
    model = _model(case, p, device, sdpa)
    runs: list[list[float]] = []  # each run's decode steps: one run is ~50 ms, one load burst

    def run() -> dict:
        out = generate(model, p, device)
        runs.append(out["steps"])
        out.pop("cache")
        return out
    res, mem = peak_memory_repeated(run, device, mem_repeats, mem_budget_s)
    while len(runs) < TIME_RUNS:  # (CUDA measures memory in one run; the timing needs repeats)
        run()
    return {**res, "runs": runs, "mem": mem, "model_bytes": sum(t.nbytes for t in model.parameters()),
            "attn_implementation": model.config._attn_implementation}


def generate(model, p: dict, device) -> dict:
    """Prefill + N greedy steps on a DynamicCache; returns measurements."""
    from transformers import DynamicCache
    gen = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, p["vocab"], (p["batch"], p["prompt"]), generator=gen).to(device)
    cache = DynamicCache(config=model.config)
    # transformers 5.x renamed forward's ``past_key_values`` to ``cache``
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    steps, max_bytes = [], 0
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True, **{kw: cache})
        check_finite(out.logits, "prefill logits")
        logits = [out.logits.cpu()]  # (kept on the CPU: the device's peak memory is the decode's)
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens = [tok]
        for i in range(p["new_tokens"]):
            synchronize(device)
            t0 = time.perf_counter()
            out = model(input_ids=tok, use_cache=True, **{kw: cache})
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(tok)
            synchronize(device)
            steps.append(time.perf_counter() - t0)
            logits.append(out.logits.cpu())
            if i in (0, p["new_tokens"] - 1):
                check_finite(out.logits, f"decode step {i} logits")
            max_bytes = max(max_bytes, cache_bytes(cache)[0])
    nbytes, storage, seq = cache_bytes(cache)
    tokens = torch.cat(tokens, dim=1).cpu()
    return {"cache": cache, "steps": steps, "cache_bytes": nbytes, "cache_storage_bytes": storage,
            "cached_seq": seq, "cache_bytes_max": max(max_bytes, nbytes), "tokens": tokens,
            # what the decode fed (the prompt, then each step's token) and its logits (B, P + N, V)
            "fed": torch.cat([ids.cpu(), tokens[:, :-1]], dim=1), "logits": torch.cat(logits, dim=1)}


def decode_parity(case: str, p: dict, fed: torch.Tensor, decoded: torch.Tensor) -> dict:
    """The decoded logits (prefill + N steps on the cache, the target's SDPA) against one full
    forward over the same tokens without a cache, under the tolerance policy: the truth is the
    same model (same seed, same weights) in float64 on torch's SDPA, the naive yardstick that
    full forward in the profile's dtype. Runs in the harness's process, on the CPU."""
    from harness.spec import tolerance
    runs = {}
    for dtype in ("float64", p["dtype"]):
        model = _model(case, {**p, "dtype": dtype}, "cpu", None)
        with torch.inference_mode():
            runs[dtype] = model(input_ids=fed, use_cache=False).logits
    cmp = tolerance.compare(decoded, runs["float64"], runs[p["dtype"]], dtype=getattr(torch, p["dtype"]))
    return {"decode_max_abs_error": cmp.max_error, "decode_allowed_error": cmp.allowed,
            "decode_naive_error": cmp.naive_error, "decode_parity": bool(cmp.ok)}


def _mha_bytes(ctx: Context, p: dict) -> int | None:
    if "mha_bytes" in ctx.state:
        return ctx.state["mha_bytes"]
    for row in ctx.store.done.values():  # resumed run: mha measured before
        if row["suite"] == SUITE and row["case"] == "mha" and \
                {k: v for k, v in row["params"].items() if k != "kv_heads"} == \
                {k: v for k, v in p.items() if k != "kv_heads"}:
            return row["metrics"]["cache_bytes"]
    return None


def measure(ctx: Context, case: str, p: dict) -> dict:
    from harness.adapters.hf_attention_interface import hf_available
    why = hf_available()
    if why:
        raise Skip(why)
    sdpa = ctx.require("scaled_dot_product_attention")  # Skip without it: never torch's instead
    res = ctx.on_target(decode_run, case, p, ctx.device, sdpa, getattr(ctx.profile, "mem_repeats", 1),
                        getattr(ctx.profile, "mem_budget_s", None))
    runs, mem = res["runs"], res["mem"]
    steps = [t for r in runs for t in r]
    # the repeat-to-repeat spread is over whole runs (a run's mean step): the steps of one run
    # differ by design (the cache grows from P to P + N tokens), so their IQR is the workload's
    # shape, not noise (issue 25: it read 28-89 % on a quiet machine and left every point undecided)
    per_run = [sum(r) / len(r) for r in runs]
    itemsize = torch.empty(0, dtype=getattr(torch, p["dtype"])).element_size()
    total = p["prompt"] + p["new_tokens"]
    seq = min(total, p["window"] - 1) if case == "rolling_window" else total
    formula = cache_formula(p["layers"], p["kv_heads"], p["head_dim"], seq, p["batch"], itemsize)
    q1, _, q3 = statistics.quantiles(per_run, n=4, method="inclusive") if len(per_run) > 1 else (per_run[0],) * 3
    parity = decode_parity(case, p, res["fed"], res["logits"])
    m = {"cache_bytes": res["cache_bytes"], "cache_formula_bytes": formula,
         "match": res["cache_bytes"] == formula, "cached_seq": res["cached_seq"],
         "cache_seq_formula": seq, "cache_storage_bytes": res["cache_storage_bytes"],
         "cache_bytes_max": res["cache_bytes_max"],
         "time_s": statistics.median(per_run), "time_iqr_s": q3 - q1, "time_min_s": min(per_run),
         "repeats": len(per_run), "time_samples_s": per_run, "step_time_median_s": statistics.median(steps),
         "tokens_per_s": p["batch"] * len(steps) / sum(steps),
         **mem,
         "model_bytes": res["model_bytes"], "attn_implementation": res["attn_implementation"], **parity}
    if case == "rolling_window":
        m["full_cache_formula_bytes"] = cache_formula(p["layers"], p["kv_heads"], p["head_dim"], total,
                                                      p["batch"], itemsize)
        m["capped"] = res["cache_bytes_max"] <= formula
    else:
        if case == "mha":
            ctx.state["mha_bytes"] = res["cache_bytes"]
        mha = _mha_bytes(ctx, p)
        m["head_ratio"] = p["kv_heads"] / p["heads"]
        if mha:
            m["cache_ratio_vs_mha"] = res["cache_bytes"] / mha
            m["ratio_match"] = res["cache_bytes"] * p["heads"] == mha * p["kv_heads"]
    return m


def points(ctx: Context) -> list[Point]:
    prof = ctx.profile.kv_cache
    base = {"heads": prof.heads, "head_dim": prof.head_dim, "layers": prof.layers, "batch": prof.batch,
            "prompt": prof.prompt, "new_tokens": prof.new_tokens, "dtype": prof.dtype,
            "intermediate": prof.intermediate, "vocab": prof.vocab}
    out = []
    for case, kv in kv_variants(prof.heads) + [("rolling_window", prof.heads)]:
        if not ctx.wants(case):
            continue
        p = {**base, "kv_heads": kv}
        if case == "rolling_window":
            p["window"] = prof.window
        out.append(Point(SUITE, case, p, functools.partial(measure, ctx, case, p),
                         role="target" if case in TARGET_CASES else "comparison"))
    return out + kv_cache_paged.points(ctx)


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    rs = [r for r in rows if r["suite"] == SUITE]
    ok, failed = [r for r in rs if r["status"] == "ok"], failed_points(rs)
    label = lambda r: f"{r['case']} kv={r['params']['kv_heads']}"  # noqa: E731
    if not ok and not failed:
        return [Check("kv cache bytes == formula", None, "nothing measured" + uncompared(rs, label) if rs
                      else "not run")]
    bad = [r for r in ok if not r["metrics"]["match"]]
    # a skipped point (the target lacks the name it needs) is left out, never counted as a mismatch
    checks = [Check("kv cache bytes == formula", not bad and not failed,
                    "cache bytes measured vs formula: "
                    + ("; ".join(f"{label(r)}: {r['metrics']['cache_bytes']} B"
                                 + (" ==" if r["metrics"]["match"] else " !=")
                                 + f" {r['metrics']['cache_formula_bytes']} B" for r in ok) or "none")
                    + uncompared(rs, label))]
    ratio = [r for r in ok if "ratio_match" in r["metrics"]]
    if ratio:
        checks.append(Check("kv cache ratios == head ratios", all(r["metrics"]["ratio_match"] for r in ratio),
                            ", ".join(f"kv={r['params']['kv_heads']}: {r['metrics']['cache_ratio_vs_mha']:.4g}"
                                      f" vs {r['metrics']['head_ratio']:.4g}" for r in ratio)))
    parity = [r for r in ok if "decode_parity" in r["metrics"] and r["case"] != kv_cache_paged.CASE]
    if parity:
        checks.append(Check("decoded logits == full forward (tolerance policy)",
                            all(r["metrics"]["decode_parity"] for r in parity),
                            ", ".join(f"{r['case']} kv={r['params']['kv_heads']}: max error "
                                      f"{r['metrics']['decode_max_abs_error']:.3g} (allowed "
                                      f"{r['metrics']['decode_allowed_error']:.3g})" for r in parity)))
    checks += kv_cache_paged.summary(ctx, rows)
    roll = [r for r in ok if r["case"] == "rolling_window"]
    for r in roll:
        m = r["metrics"]
        checks.append(Check("rolling cache capped at the window", bool(m["capped"]),
                            f"max {m['cache_bytes_max']} B over the run, formula min(P+N, w-1) tokens = "
                            f"{m['cache_formula_bytes']} B, full cache would be {m['full_cache_formula_bytes']} B"))
    return checks
