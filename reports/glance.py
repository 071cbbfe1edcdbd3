"""What a person reads of a suite's summary table (summary.md and report.html): narrow tables.

``narrow(table, suite)`` -> ``Glance``:
- ``skipped``: the skipped rows folded to one row per reason, ``reason | points | cases``;
- ``common``: the columns that hold one value in every remaining row (impl, device, batch,
  dtype, status ok, ...), said once above the table instead of in every row (a single run's
  ``run_id``/``machine``: not at all, the report's header names them);
- ``table``: the remaining rows with their identifying columns (case, role, the params that vary,
  a target's case under the target's own name: ``my_attn.py (sdpa)``,
  status and reason when a point failed) and the suite's headline metrics (``HEADLINE``; a suite
  not listed keeps its first ``MAX_METRICS``); all-empty and telemetry columns dropped.
The full table (every column, every row) stays in ``summary_<suite>.csv/.parquet``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

#: the metrics shown per suite, in this order (those the suite's rows have)
HEADLINE = {
    "scaling": ("time_s", "time_iqr_s", "peak_mem_bytes", "tflops"),
    "receptive_field": ("receptive_field", "formula", "match"),
    "kv_cache": ("cache_bytes", "cache_formula_bytes", "match", "tokens_per_s"),
    "finetune": ("accuracy", "accuracy_ci95", "majority_accuracy", "margin_over_majority", "time_s"),
    "pytest-benchmark": ("time_s", "time_iqr_s", "repeats"),
}
MAX_METRICS = 4
#: identifying columns before the params; "case" is never folded into ``common``
IDS = ("run_id", "machine", "case", "role", "impl", "device")


@dataclass
class Glance:
    table: pd.DataFrame
    common: dict = field(default_factory=dict)
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["reason", "points", "cases"]))


def case_name(case, role=None, impl=None) -> str:
    """A case as a legend says it: a ``target.X`` row of role "target" under the target's own name
    (``my_attn.py (X)``: the file name of its spec), any other case as it is."""
    case = str(case)
    if role == "target" and case.startswith("target.") and impl:
        return f"{Path(str(impl)).name} ({case.removeprefix('target.')})"
    return case


def key_target(key) -> str | None:
    """The target id a target row's point key names (``suite|case@target|params``), else None."""
    parts = str(key).split("|")
    return parts[1].split("@", 1)[1] if len(parts) > 1 and "@" in parts[1] else None


def named_cases(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each ``target.X`` case of role "target" under the target's own name (from its
    ``impl`` column, else from its point ``key``: a baseline comparison's rows)."""
    if not {"case", "role"} <= set(table.columns) or table.empty:
        return table
    if "impl" in table.columns:
        impls = table["impl"]
    elif "key" in table.columns:
        impls = table["key"].map(key_target)
    else:
        return table
    names = [case_name(c, r, i) for c, r, i in zip(table["case"], table["role"], impls)]
    return table.assign(case=names)


def fold_skipped(table: pd.DataFrame) -> pd.DataFrame:
    """One row per skip reason: ``reason | points | cases`` (the cases it skipped, in order)."""
    skipped = table[table["status"] == "skipped"] if "status" in table else table.iloc[0:0]
    if skipped.empty:
        return pd.DataFrame(columns=["reason", "points", "cases"])
    reasons = skipped["reason"].fillna("no reason").astype(str)
    rows = [{"reason": reason, "points": len(group),
             "cases": ", ".join(dict.fromkeys(group["case"].astype(str))) if "case" in group else ""}
            for reason, group in skipped.groupby(reasons, sort=False)]
    return pd.DataFrame(rows, columns=["reason", "points", "cases"])


def _metrics(table: pd.DataFrame, suite: str) -> list[str]:
    after = list(table.columns)[list(table.columns).index("reason") + 1:] if "reason" in table else []
    present = [c for c in after if not str(c).startswith("telemetry.") and table[c].notna().any()]
    wanted = HEADLINE.get(suite)
    return [m for m in wanted if m in present] if wanted else present[:MAX_METRICS]


def below_resolution_text(table: pd.DataFrame) -> pd.DataFrame:
    """``peak_mem_bytes`` as a person reads it: a point recorded below the CPU memory probe's
    resolution (null, with ``peak_mem_resolution_bytes``) reads "below resolution (< R bytes)"."""
    if "peak_mem_resolution_bytes" not in table:
        return table
    if "peak_mem_bytes" not in table:  # every point below: no row had a value for the column
        at = list(table.columns).index("peak_mem_resolution_bytes")
        table = table.copy()
        table.insert(at, "peak_mem_bytes", float("nan"))
    below = table["peak_mem_bytes"].isna() & table["peak_mem_resolution_bytes"].notna()
    if "status" in table:
        below &= table["status"] == "ok"
    if not below.any():
        return table
    out = table.copy()
    out["peak_mem_bytes"] = out["peak_mem_bytes"].map(lambda v: v if pd.isna(v) else int(v)).astype(object)
    out.loc[below, "peak_mem_bytes"] = [f"below resolution (< {r:.0f} bytes)"
                                        for r in out.loc[below, "peak_mem_resolution_bytes"]]
    return out


def narrow(table: pd.DataFrame, suite: str) -> Glance:
    """The suite's summary table as a person reads it (see the module docstring)."""
    table = below_resolution_text(named_cases(table))
    skipped = fold_skipped(table)
    rows = table[table["status"] != "skipped"] if "status" in table else table
    metrics = _metrics(table, suite)
    reason_at = list(table.columns).index("reason") if "reason" in table else len(table.columns)
    ids = [c for c in list(table.columns)[:reason_at] if c not in metrics]
    ids += ["reason"] if "reason" in table else []
    shown = rows[[c for c in ids + metrics if c in rows]]
    shown = shown[[c for c in shown.columns if shown[c].notna().any() or c == "case"]]
    common = {}
    if len(shown) > 1:
        for c in [c for c in shown.columns if c not in metrics and c not in ("case", "reason")]:
            if shown[c].nunique(dropna=False) == 1:
                common[c] = shown[c].iloc[0]
        shown = shown.drop(columns=list(common))
    for c in ("run_id", "machine"):  # one run: the page's header names it
        common.pop(c, None)
    return Glance(shown.reset_index(drop=True), common, skipped)


def common_text(common: dict) -> str:
    """``every row: impl reference, device cpu, batch 1`` (empty when there is nothing common)."""
    return ("every row: " + ", ".join(f"{k} {v}" for k, v in common.items())) if common else ""


def markdown(suite: str, table: pd.DataFrame, to_markdown) -> str:
    """The ``## suite`` section of summary.md: the common values, the narrow table and, when
    points were skipped, ``skipped (reason -> points)``."""
    g = narrow(table, suite)
    parts = [f"## {suite}\n"]
    if g.common:
        parts.append(common_text(g.common) + "\n")
    parts.append(to_markdown(g.table) + "\n")
    if len(g.skipped):
        parts.append(f"skipped (reason -> points):\n\n{to_markdown(g.skipped)}\n")
    return "\n".join(parts)
