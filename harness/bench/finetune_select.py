"""Choose the fine-tune hyperparameters on a validation split, never on the test movies.

    python -m harness.bench.finetune_select --out runs/select [--lr 2e-5,3e-5,5e-5,1e-4,2e-4] \\
        [--epochs 3] [--batch-size 32] [--seeds 0,1] [--train-examples N] [--max-steps N]
    python -m harness.bench.finetune_select --out runs/select --summary-only

The training movies of the finetune suite (``harness.bench.models.finetune_data.movie_split``: the test
movies are dropped here and never read) are split again by movie, ``VALIDATION_FRACTION`` of their
rows to validation (``fd.VALIDATION_SALT``). Every grid point (lr x epochs x batch size) is trained
on the rest with each seed and scored on the validation movies. The grid follows Devlin et al.
(2018, appendix A.3: lr {5e-5, 3e-5, 2e-5}, batch {16, 32}, epochs {2, 3, 4}) plus 1e-4, which
small BERTs such as MiniLM tolerate, and 2e-4 past it (a best point on the edge of a grid
means the grid was too small); the default runs its lr axis at 3 epochs and batch 32, the axes to
widen with the flags. Each run of the gpu profile's size costs ~10 min on 2 CPU cores, so the
selection in ``notes/finetune_selection/`` pruned by successive halving: every lr at seed 0, the
best three (incumbent included) at seed 1.

Output in ``--out``: ``select.jsonl`` (one line per grid point and seed, appended as each
finishes; a rerun skips the lines already there, so a killed run resumes), ``selection.json``
(per grid point: mean validation accuracy, its 95 % t interval over seeds, the paired difference
to ``--incumbent`` with its interval; the chosen point = the highest mean) and the same as a
Markdown table on stdout. Choosing is this tool's only output: ``PROFILES`` in
``harness.bench.finetune`` are edited by hand, citing the selection file.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from harness.basics import options
from harness.bench.finetune_train import Hyper, prepare, train_eval
from harness.bench.store import append_jsonl, read_jsonl
from harness.spec.stats import t_interval

VALIDATION_FRACTION = 0.15
SELECT_FILE = "select.jsonl"
SUMMARY_FILE = "selection.json"


def grid(lrs, epochs, batch_sizes, base: Hyper = Hyper()) -> list[Hyper]:
    return [replace(base, lr=lr, epochs=e, batch_size=b)
            for lr, e, b in itertools.product(lrs, epochs, batch_sizes)]


def hyper_key(h: Hyper) -> str:
    """The name of a hyperparameter point in select.jsonl (not a run folder's point key)."""
    return f"lr={h.lr:g} epochs={h.epochs} batch={h.batch_size} max_length={h.max_length}"


def _done(path: Path) -> dict[tuple[str, int], dict]:
    """The finished runs in ``select.jsonl`` (a line cut short by a kill is skipped)."""
    return {(r["point"], int(r["seed"])): r for r in read_jsonl(path) if "point" in r and "seed" in r}


def summarize(records: list[dict], incumbent: str | None) -> dict:
    """Per grid point: mean validation accuracy and interval, paired delta to the incumbent."""
    by_point: dict[str, dict[int, dict]] = {}
    for r in records:
        by_point.setdefault(r["point"], {})[int(r["seed"])] = r
    inc = by_point.get(incumbent, {}) if incumbent else {}
    rows = []
    for point, seeds in by_point.items():
        accs = [seeds[s]["accuracy"] for s in sorted(seeds)]
        mean, ci = t_interval(accs)
        row = {"point": point, **seeds[min(seeds)]["hyper"], "n_seeds": len(accs),
               "val_accuracy": mean, "val_accuracy_ci95": ci, "val_accuracy_seeds": accs,
               "val_loss": statistics.fmean(seeds[s]["val_loss"] for s in seeds),
               "train_time_s": statistics.median(seeds[s]["train_time_s"] for s in seeds)}
        paired = [seeds[s]["accuracy"] - inc[s]["accuracy"] for s in sorted(seeds) if s in inc]
        if inc and point != incumbent and paired:
            row["delta_vs_incumbent"], row["delta_vs_incumbent_ci95"] = t_interval(paired)
        rows.append(row)
    rows.sort(key=lambda r: -r["val_accuracy"])
    return {"split": "validation (training movies only; test movies unused)",
            "validation_fraction": VALIDATION_FRACTION, "incumbent": incumbent,
            "chosen": rows[0]["point"] if rows else None, "points": rows}


def markdown(summary: dict) -> str:
    lines = ["| point | seeds | val accuracy | 95 % CI | delta vs incumbent | train s |",
             "|---|---|---|---|---|---|"]
    for r in summary["points"]:
        ci = r["val_accuracy_ci95"]
        d = r.get("delta_vs_incumbent")
        dci = r.get("delta_vs_incumbent_ci95")
        mark = " (chosen)" if r["point"] == summary["chosen"] else ""
        mark += " (incumbent)" if r["point"] == summary["incumbent"] else ""
        lines.append(f"| {r['point']}{mark} | {r['n_seeds']} | {r['val_accuracy']:.4f} | "
                     + (f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-") + " | "
                     + ("-" if d is None else f"{d:+.4f}" + (f" [{dci[0]:+.4f}, {dci[1]:+.4f}]" if dci else ""))
                     + f" | {r['train_time_s']:.0f} |")
    return "\n".join(lines)


def run(out_dir, hypers: list[Hyper], seeds, *, device: str = "cpu", train_examples: int | None = None,
        max_steps: int | None = None, incumbent: Hyper | None = None, log=sys.stderr) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / SELECT_FILE
    done = _done(path)
    lengths = {h.max_length for h in hypers}
    data = {n: prepare(train_examples, None, n, validation_fraction=VALIDATION_FRACTION) for n in lengths}
    todo = [(h, s) for s in seeds for h in hypers if (hyper_key(h), s) not in done]
    print(f"[select] {len(hypers)} grid point(s) x {len(seeds)} seed(s): {len(todo)} run(s) to do, "
          f"{len(done)} kept from {path}", file=log, flush=True)
    for i, (h, s) in enumerate(todo, 1):
        d = data[h.max_length]
        t0 = time.perf_counter()
        r = train_eval(d, h, s, device, max_steps=max_steps)
        rec = {"point": hyper_key(h), "seed": s, "hyper": h.as_params(), "accuracy": r["accuracy"],
               "val_loss": r["test_loss"], "train_time_s": r["train_time_s"], "steps": r["steps"],
               "n_train": len(d.train_ids), "n_val": len(d.test_ids), "train_movies": d.n_train_movies,
               "val_movies": d.n_test_movies, "max_steps": max_steps, "device": device}
        append_jsonl(path, rec)  # a line cut by a kill is dropped before the next one
        done[(rec["point"], s)] = rec
        print(f"[select] {i}/{len(todo)} {rec['point']} seed {s}: validation accuracy "
              f"{r['accuracy']:.4f} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    wanted = {hyper_key(h) for h in hypers}
    summary = summarize([r for r in done.values() if r["point"] in wanted],
                        hyper_key(incumbent) if incumbent else None)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.bench.finetune_select", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--lr", type=_floats, default=[2e-5, 3e-5, 5e-5, 1e-4, 2e-4])
    p.add_argument("--epochs", type=_ints, default=[3])
    p.add_argument("--batch-size", type=_ints, default=[32])
    p.add_argument("--max-length", type=int, default=Hyper.max_length)
    p.add_argument("--seeds", type=_ints, default=[0, 1])
    p.add_argument("--incumbent", default=None,
                   help="lr,epochs,batch to pair the deltas with (default: the gpu profile's, 1e-4,3,32)")
    p.add_argument("--train-examples", type=int, default=None, help="subsample the training split (default: all)")
    p.add_argument("--max-steps", type=int, default=None, help="cap training steps (smoke runs)")
    options.add_device(p)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--summary-only", action="store_true",
                   help="train nothing: summarize every line of OUT/select.jsonl (points pruned early included)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = Hyper(max_length=args.max_length)
    if args.incumbent:
        lr, ep, bs = args.incumbent.split(",")
        incumbent = replace(base, lr=float(lr), epochs=int(ep), batch_size=int(bs))
    else:
        from harness.bench.finetune import PROFILES
        incumbent = replace(PROFILES["gpu"].hyper, max_length=args.max_length)
    if args.summary_only:
        summary = summarize(list(_done(Path(args.out) / SELECT_FILE).values()), hyper_key(incumbent))
        (Path(args.out) / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    else:
        hypers = grid(args.lr, args.epochs, args.batch_size, base)
        if incumbent not in hypers:
            hypers.append(incumbent)
        summary = run(args.out, hypers, args.seeds, device=args.device, train_examples=args.train_examples,
                      max_steps=args.max_steps, incumbent=incumbent)
    print(markdown(summary))
    print(f"chosen: {summary['chosen']}  ({Path(args.out) / SUMMARY_FILE})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
