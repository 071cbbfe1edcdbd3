"""Summary tables from the tidy results: one wide table per suite (one row per point, one column per
metric), written as CSV, Parquet (pyarrow) and Markdown. Never pickle."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.verdicts.runfolder import PASSES
from harness.reports.load import param_columns, points

FORMATS = ("csv", "parquet", "md")


def suite_table(df: pd.DataFrame, suite: str) -> pd.DataFrame:
    """Points of one suite: run, machine, case, role, impl, device, its params, status, reason, metrics..."""
    sub = df[df["suite"] == suite]
    pts = points(sub)
    params = [c for c in param_columns(sub) if pts[c].notna().any()]
    values = sub.dropna(subset=["metric"])
    if values.empty:
        wide = pd.DataFrame(index=pd.MultiIndex.from_arrays([[], []], names=["run_id", "key"]))
    else:
        wide = values.pivot_table(index=["run_id", "key"], columns="metric", values="value",
                                  aggfunc="last", sort=False)
        wide.columns = [str(c) for c in wide.columns]
    metric_order = list(dict.fromkeys(values["metric"].astype(str)))
    table = pts.merge(wide.reset_index(), on=["run_id", "key"], how="left")
    if "pass" in params:  # a scaling case's forward rows, then its backward rows, each by size
        params = ["pass"] + [c for c in params if c != "pass"]
    cols = ["run_id", "machine", "case", "role", "impl", "device"] + params + ["status", "reason"] + \
        [m for m in metric_order if m in table.columns]
    sort = [c for c in ["run_id", "case"] + params if c in table.columns]
    return table[cols].sort_values(sort, kind="stable", na_position="last", key=_in_pass_order).reset_index(drop=True)


def _in_pass_order(col: pd.Series) -> pd.Series:
    """A sort key: the ``pass`` column in ``PASSES`` order (fwd, bwd, fwd_bwd), others as they are."""
    if col.name != "pass":
        return col
    return col.map({p: i for i, p in enumerate(PASSES)}).astype("Float64")


def summary_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {suite: suite_table(df, suite) for suite in dict.fromkeys(df["suite"].astype(str))}


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """For Markdown/HTML: no telemetry columns, no all-empty columns, no single-value run columns;
    a peak below the memory probe's resolution in words (``reports.glance.below_resolution_text``);
    a target's case under the target's name (``reports.glance.named_cases``)."""
    from harness.reports.glance import below_resolution_text, named_cases
    table = below_resolution_text(named_cases(table))
    keep = [c for c in table.columns if not str(c).startswith("telemetry.")
            and (table[c].notna().any() or c in ("status",))]
    out = table[keep]
    for c in ("run_id", "machine"):
        if c in out.columns and out[c].nunique(dropna=False) <= 1 and len(out.columns) > 1:
            out = out.drop(columns=c)
    if "reason" in out.columns and not out["reason"].notna().any():
        out = out.drop(columns="reason")
    return out


def to_markdown(table: pd.DataFrame) -> str:
    if table.empty:
        return "(none)"
    shown = table.astype(object).where(table.notna(), "")
    return shown.to_markdown(index=False, floatfmt=".4g")


def parse_formats(text: str | None) -> list[str]:
    if not text:
        return list(FORMATS)
    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown format(s) {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    return formats


def write_frame(table: pd.DataFrame, out, stem: str, formats, title: str | None = None) -> list[Path]:
    """Write ``table`` as ``out/stem.{csv,parquet,md}`` (those in ``formats``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if "csv" in formats:
        paths.append(out / f"{stem}.csv")
        table.to_csv(paths[-1], index=False)
    if "parquet" in formats:
        paths.append(out / f"{stem}.parquet")
        table.to_parquet(paths[-1], engine="pyarrow", index=False)
    if "md" in formats:
        paths.append(out / f"{stem}.md")
        head = f"# {title}\n\n" if title else ""
        paths[-1].write_text(head + to_markdown(display_table(table)) + "\n")
    return paths


def write_tables(df: pd.DataFrame, out, formats=FORMATS,
                 tables: dict[str, pd.DataFrame] | None = None) -> list[Path]:
    """The tidy table (``results.csv/.parquet``), one ``summary_<suite>`` per suite (every column),
    ``summary.md`` (per suite a narrow table and its skips folded to counts: ``reports.glance``)."""
    out = Path(out)
    tables = summary_tables(df) if tables is None else tables
    paths = write_frame(df, out, "results", [f for f in formats if f != "md"])
    for suite, table in tables.items():
        paths += write_frame(table, out, f"summary_{safe_name(suite)}", [f for f in formats if f != "md"])
    if "md" in formats:
        from harness.reports.glance import markdown
        parts = ["# Benchmark summary\n", "Narrow tables: every column and row is in "
                 "summary_<suite>.csv/.parquet.\n"]
        for suite, table in tables.items():
            parts.append(markdown(suite, table, to_markdown))
        paths.append(out / "summary.md")
        paths[-1].write_text("\n".join(parts))
    return paths


def safe_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(text))
