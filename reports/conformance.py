"""The conformance table: property x target -> pass / fail / convention:<name> / skipped (reason).

Rows come from the pytest plug-in, one per test phase that decided an outcome:
``{"property", "target", "when", "outcome", "label", "reason"}``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

_RANK = {"fail": 3, "error": 3, "skipped": 1, "pass": 0}


def cell(row: dict) -> tuple[int, str]:
    """One test result as (severity, text) for the table."""
    if row["outcome"] == "failed":
        text = "fail" if row["when"] == "call" else "error"
        return _RANK[text], text
    if row["outcome"] == "skipped":
        reason = row.get("reason") or "no reason"
        if reason.startswith("unsupported ("):  # the target's own declaration, or its NotImplementedError
            return _RANK["skipped"], reason
        return _RANK["skipped"], f"skipped ({reason})"
    label = row.get("label")
    return 0, label or "pass"


def long_table(rows: list[dict]) -> pd.DataFrame:
    """One line per (property, target): the worst outcome and its reason."""
    best: dict[tuple[str, str], tuple[int, str, str]] = {}
    for row in rows:
        key = (row["property"], row["target"])
        rank, text = cell(row)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, text, row.get("reason") or "")
    data = [{"property": p, "target": t, "result": text, "detail": reason if rank >= 3 else ""}
            for (p, t), (rank, text, reason) in best.items()]
    return pd.DataFrame(data, columns=["property", "target", "result", "detail"])


def conformance_table(rows: list[dict]) -> pd.DataFrame:
    """Wide table: one row per property, one column per target."""
    df = long_table(rows)
    if df.empty:
        return pd.DataFrame()
    order = list(dict.fromkeys(df["property"]))
    wide = df.pivot(index="property", columns="target", values="result").reindex(order)
    wide.columns.name = None
    return wide


def target_line(t) -> str:
    """``- `spec`: file (version V)``; without a version (``unversioned``) nothing about one."""
    version = getattr(t, "version", None)
    tail = f" (version {version})" if version and version != "unversioned" else ""
    return f"- `{t.spec}`: {t.file}{tail}\n"


def write_conformance(rows: list[dict], out_dir, targets=()) -> list[Path]:
    """Write conformance.csv, conformance.md and conformance.json into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wide = conformance_table(rows)
    long = long_table(rows)
    paths = [out / "conformance.csv", out / "conformance.md", out / "conformance.json"]
    wide.to_csv(paths[0])
    header = "# Conformance\n\n" + "".join(target_line(t) for t in targets)
    paths[1].write_text(header + "\n" + wide.to_markdown() + "\n\n## Failures\n\n" +
                        (long[long.detail != ""].to_markdown(index=False) if (long.detail != "").any()
                         else "none") + "\n")
    paths[2].write_text(json.dumps({"results": long.to_dict(orient="records")}, indent=1))
    return paths
