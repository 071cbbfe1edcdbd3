"""PNG plots (matplotlib Agg + seaborn) from the tidy results.

- scaling: per pass (forward, backward, forward+backward: one figure each), log-log time and peak
  memory vs sequence length n (one panel above the other), one line
  per case (and run, and other varying params), the fitted exponent in the legend (the run's
  fits.json entry, else ``harness.spec.stats.fit_loglog`` over the same sizes,
  ``harness.bench.fit.FIT_POINTS``, for time and memory alike: a plotted exponent is the printed and
  stored one); oom/error/nan points as red crosses along the top of the panel at their n;
- receptive field: heatmap of gradient magnitude by distance and depth (``receptive_field_grad.csv``),
  titled with the case it shows (``harness.verdicts.runfolder.grad_case``);
Titles and legends are in words (``attention time vs sequence length``; ``window 8, causal``), a
target row under the target's own name (``case_name``), legends right of the axes, outside the data.
- KV cache: bars by head configuration, measured vs formula;
- finetune: accuracy bars with their 95 % CI when the metrics carry one.
``make_plots`` returns ``[Plot(section, title, path)]``.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.transforms as mtransforms  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402

from harness.bench.fit import FIT_POINTS, fit_key  # noqa: E402
from harness.verdicts.runfolder import DEFAULT_PASS, PASS_WORDS, PASSES, grad_case  # noqa: E402
from harness.spec.stats import fit_loglog  # noqa: E402
from harness.reports.decide import CI_NAMES  # noqa: E402
from harness.reports.glance import case_name  # noqa: E402
from harness.verdicts.runfolder import BAD_STATUSES  # noqa: E402
from harness.reports.load import param_columns, points  # noqa: E402
from harness.reports.tables import safe_name  # noqa: E402


@dataclass
class Plot:
    section: str
    title: str
    path: Path


def _varying(pts: pd.DataFrame, params: list[str], exclude=()) -> list[str]:
    """The parameter columns (and impl, device) that take more than one value among ``pts``."""
    cols = [c for c in params + ["impl", "device"] if c not in exclude and c in pts]
    return [c for c in cols if pts[c].nunique(dropna=True) > 1]


def _wide(sub: pd.DataFrame) -> pd.DataFrame:
    """Points with their metrics as columns."""
    pts = points(sub)
    vals = sub.dropna(subset=["metric"])
    if vals.empty:
        return pts
    wide = vals.pivot_table(index=["run_id", "key"], columns="metric", values="value", aggfunc="last")
    wide.columns = [str(c) for c in wide.columns]
    return pts.merge(wide.reset_index(), on=["run_id", "key"], how="left")


#: what a suite's plots are about, in words (a suite not listed: its name)
SUITE_WORDS = {"scaling": "attention", "pytest-benchmark": "benchmark"}
METRIC_WORDS = {"time_s": "time", "peak_mem_bytes": "peak memory"}
#: words for a boolean parameter's two values (others: "name" / "not name")
BOOL_WORDS = {"causal": ("causal", "non-causal")}


def _value_words(col: str, value) -> str:
    """``window 8``, ``kv heads 2``, ``causal`` / ``non-causal``; an empty value says nothing."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    name = col.replace("_", " ")
    if isinstance(value, (bool, np.bool_)) or str(value) in ("True", "False"):
        yes, no = BOOL_WORDS.get(col, (name, f"not {name}"))
        return yes if str(value) == "True" else no
    return str(value) if col in ("run_id", "impl", "device") else f"{name} {value}"


def _label(row, cols) -> str:
    """The legend (or bar) label of ``row``: its case by name, then the varying values in words."""
    words = [case_name(row["case"], row.get("role"), row.get("impl")) if c == "case" else
             _value_words(c, row[c]) for c in cols]
    return ", ".join(w for w in words if w)


def _legend_outside(ax, handles) -> None:
    """The legend right of the axes, outside the data (``bbox_inches="tight"`` keeps it)."""
    if handles:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                  ncol=1 if len(handles) <= 14 else 2)


def _save(fig, out: Path, name: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{safe_name(name)}.png"
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def _fit_for(runs_by_id, run_id, suite, case, metric, n, y, single, *, pass_=DEFAULT_PASS) -> dict | None:
    """The stored fit of ``case``'s ``pass_`` (fits.json), else ``fit_loglog`` over the same points."""
    fits = getattr(runs_by_id.get(run_id), "fits", None) or {}
    key = fit_key(suite, case, pass_)
    entry = fits.get(f"{key}|{metric}") or (fits.get(key) if metric == "time_s" and single else None)
    return entry if entry else fit_loglog(n, y, points=FIT_POINTS)


def fit_label(fit: dict | None) -> str:
    """The legend's "k=<exponent> [lo, hi]" of a fit (no interval when it has none); "" without a fit."""
    if not fit or fit.get("exponent") is None:
        return ""
    lo, hi = (fit.get("ci95") or [math.nan, math.nan])[:2]
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None and math.isfinite(lo) \
        and math.isfinite(hi) else ""
    return f"k={fit['exponent']:.2f}{ci}"


def scaling_plot(df: pd.DataFrame, suite: str, runs_by_id: dict, out: Path) -> list[Plot]:
    """One figure per pass the suite's rows have (forward, backward, forward+backward; rows
    without a pass are forward rows): ``<suite>_scaling.png`` for the forward (or a suite without
    passes), ``<suite>_scaling_<pass>.png`` for the others."""
    sub = df[df["suite"] == suite]
    if "n" not in sub.columns or not (sub["metric"] == "time_s").any():
        return []
    passes = sub["pass"].fillna(DEFAULT_PASS).astype(str) if "pass" in sub.columns else \
        pd.Series(DEFAULT_PASS, index=sub.index)
    order = [p for p in PASSES if (passes == p).any()] + sorted(set(passes) - set(PASSES))
    plots = []
    for pass_ in order:
        plot = _scaling_figure(sub[passes == pass_], suite, pass_, runs_by_id, out,
                               worded=len(order) > 1 or pass_ != DEFAULT_PASS)
        if plot is not None:
            plots.append(plot)
    return plots


def _scaling_figure(sub: pd.DataFrame, suite: str, pass_: str, runs_by_id: dict, out: Path,
                    worded: bool) -> Plot | None:
    """Time and peak memory against n of one pass, one line per case (module doc)."""
    if not (sub["metric"] == "time_s").any():
        return None
    data = _wide(sub)
    data["n"] = pd.to_numeric(data["n"], errors="coerce")
    data = data.dropna(subset=["n"])
    metrics = [m for m in ("time_s", "peak_mem_bytes") if m in data.columns
               and (data[m] > 0).any() and data[m].notna().any()]
    if not metrics:
        return None
    group_cols = (["run_id"] if data["run_id"].nunique() > 1 else []) + ["case"] + \
        _varying(data, param_columns(sub), exclude=("n", "case", "pass"))
    groups = list(data.groupby(group_cols, sort=True, dropna=False))
    n_cases = data.groupby(["run_id", "case"]).ngroups
    palette = sns.color_palette("tab10", max(len(groups), 1))
    fig, axes = plt.subplots(len(metrics), 1, figsize=(8.5, 4.4 * len(metrics)), squeeze=False)
    what = SUITE_WORDS.get(suite, suite) + (f" {PASS_WORDS.get(pass_, pass_)}" if worded else "")
    for ax, metric in zip(axes[:, 0], metrics):
        for color, (_, g) in zip(palette, groups):
            g = g.sort_values("n")
            ok = g[(g["status"] == "ok") & g[metric].notna()]
            row = g.iloc[0]
            name = _label(row, group_cols)
            if len(ok):
                single = len(groups) == n_cases
                f = _fit_for(runs_by_id, row["run_id"], suite, row["case"], metric,
                             ok["n"].astype(float), ok[metric], single, pass_=pass_)
                ax.plot(ok["n"].astype(float), ok[metric], "o-", color=color, ms=4,
                        label=f"{name} ({fit_label(f)})" if f else name)
            bad = g[g["status"].isin(BAD_STATUSES)]
            if len(bad):
                trans = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
                ax.scatter(bad["n"].astype(float), [0.96] * len(bad), transform=trans, marker="X",
                           s=70, color=color, edgecolors="red", linewidths=1.5, zorder=5)
                for x, status in zip(bad["n"].astype(float), bad["status"]):
                    ax.annotate(str(status), (x, 0.96), xycoords=trans, textcoords="offset points",
                                xytext=(0, -13), ha="center", fontsize=7, color="red")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (sequence length)")
        ax.set_ylabel({"time_s": "median time (s)", "peak_mem_bytes": "peak memory (bytes)"}[metric])
        ax.set_title(f"{what} {METRIC_WORDS[metric]} vs sequence length")
        ax.grid(True, which="both", alpha=0.3)
        if (data["status"].isin(BAD_STATUSES)).any():
            ax.scatter([], [], marker="X", color="grey", edgecolors="red", label="oom / error / nan")
        _legend_outside(ax, ax.get_legend_handles_labels()[0])
    fig.tight_layout()
    name = f"{suite}_scaling" if pass_ == DEFAULT_PASS else f"{suite}_scaling_{pass_}"
    return Plot(suite, f"{what}: time and memory vs sequence length (log-log, k = fitted exponent, 95% CI)",
                _save(fig, out, name))


def _grad_case_name(run) -> str:
    """The case ``receptive_field_grad.csv`` of ``run`` holds, by name, with its window."""
    rows = [r for r in run.results if r.get("suite") == "receptive_field" and r.get("status") == "ok"]
    if not rows:
        return "the measured case"
    case = grad_case(r["case"] for r in rows)
    row = next(r for r in rows if r["case"] == case)
    window = (row.get("params") or {}).get("window")
    return case_name(case, row.get("role"), row.get("impl")) + (f", window {window}" if window else "")


def rf_heatmap(run, out: Path) -> Plot | None:
    grad = run.rf_grad
    if grad is None or grad.empty:
        return None
    table = grad.pivot_table(index="depth", columns="distance", values="grad_norm", aggfunc="mean")
    table = table.sort_index(ascending=False)
    positive = table.where(table > 0)
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(table) + 2))
    norm = LogNorm(vmin=float(np.nanmin(positive.values)), vmax=float(np.nanmax(positive.values))) \
        if positive.notna().any().any() else None
    sns.heatmap(positive, ax=ax, cmap="viridis", norm=norm, cbar_kws={"label": "gradient norm"},
                xticklabels=max(1, len(table.columns) // 16))
    ax.grid(False)
    ax.set_xlabel("distance (tokens back from the output position); blank: zero gradient")
    ax.set_ylabel("depth (layers)")
    shown = _grad_case_name(run)
    ax.set_title(f"receptive field of {shown}: gradient magnitude by distance and depth ({run.run_id})")
    return Plot("receptive_field", f"Receptive field gradient heatmap of {shown} ({run.run_id})",
                _save(fig, out, f"receptive_field_heatmap_{run.run_id}"))


def _ok_points(df: pd.DataFrame, suite: str, metric: str) -> tuple[pd.DataFrame, list[str]] | None:
    """A bar plot's data: the suite's ok points that have ``metric`` (wide), and the columns that
    tell them apart (run, case, varying parameters); None when there is none."""
    sub = df[df["suite"] == suite]
    data = _wide(sub)
    if metric not in data.columns:
        return None
    data = data[(data["status"] == "ok") & data[metric].notna()]
    if data.empty:
        return None
    cols = (["run_id"] if data["run_id"].nunique() > 1 else []) + ["case"] + \
        _varying(data, param_columns(sub), ("case",))
    return data, cols


def kv_cache_bars(df: pd.DataFrame, out: Path) -> Plot | None:
    found = _ok_points(df, "kv_cache", "cache_bytes")
    if found is None:
        return None
    data, cols = found
    data = data.assign(config=[_label(r, cols) for _, r in data.iterrows()])
    value_vars = [c for c in ("cache_bytes", "cache_formula_bytes") if c in data.columns]
    long = data.melt(id_vars=["config"], value_vars=value_vars, var_name="kind", value_name="bytes")
    long["kind"] = long["kind"].map({"cache_bytes": "measured", "cache_formula_bytes": "formula"})
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * data["config"].nunique() + 3), 4.6))
    sns.barplot(long, x="config", y="bytes", hue="kind", ax=ax, palette=["#4c72b0", "#dd8452"])
    if long["bytes"].max() > 100 * max(long["bytes"][long["bytes"] > 0].min(), 1):
        ax.set_yscale("log")
    ax.set_xlabel("head configuration")
    ax.set_ylabel("KV-cache bytes")
    ax.set_title("KV cache: measured vs formula")
    _legend_outside(ax, ax.get_legend_handles_labels()[0])
    ax.tick_params(axis="x", rotation=30, labelsize=8)
    plt.setp(ax.get_xticklabels(), ha="right", rotation_mode="anchor")
    return Plot("kv_cache", "KV cache by head configuration (measured vs formula)",
                _save(fig, out, "kv_cache_bars"))


def accuracy_bars(df: pd.DataFrame, out: Path) -> Plot | None:
    found = _ok_points(df, "finetune", "accuracy")
    if found is None:
        return None
    data, cols = found
    labels = [_label(r, cols) for _, r in data.iterrows()]
    acc = data["accuracy"].to_numpy(float)
    err = None
    for lo, hi in CI_NAMES:
        if lo in data.columns and hi in data.columns:
            err = np.vstack([acc - data[lo].to_numpy(float), data[hi].to_numpy(float) - acc])
            err = np.nan_to_num(np.clip(err, 0, None))
            break
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(labels) + 3), 4.4))
    colors = sns.color_palette("deep", len(labels))
    ax.bar(range(len(labels)), acc, yerr=err, capsize=5, color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("accuracy" + (" (95% CI)" if err is not None else ""))
    ax.set_ylim(0, max(1.0, float(np.nanmax(acc)) * 1.05))
    ax.set_title("fine-tuning accuracy")
    return Plot("finetune", "Fine-tuning accuracy" + (" with 95% CI" if err is not None else ""),
                _save(fig, out, "finetune_accuracy"))


def make_plots(df: pd.DataFrame, runs, out) -> list[Plot]:
    out = Path(out)
    sns.set_theme(style="whitegrid", context="notebook")
    runs_by_id = {r.run_id: r for r in runs}
    jobs = [(f"{suite} scaling", scaling_plot, (df, suite, runs_by_id, out))
            for suite in dict.fromkeys(df["suite"].astype(str)) if suite not in ("kv_cache", "finetune")]
    jobs += [(f"receptive-field heatmap of {r.run_id}", rf_heatmap, (r, out)) for r in runs]
    jobs += [("kv_cache bars", kv_cache_bars, (df, out)), ("finetune accuracy", accuracy_bars, (df, out))]
    plots = []
    for name, fn, args in jobs:  # one odd input costs its plot, not the report
        try:
            made = fn(*args)
        except Exception as exc:  # noqa: BLE001
            plt.close("all")
            warnings.warn(f"plot {name} failed: {type(exc).__name__}: {exc}", stacklevel=2)
            continue
        plots += [p for p in (made if isinstance(made, list) else [made]) if p is not None]
    return plots
