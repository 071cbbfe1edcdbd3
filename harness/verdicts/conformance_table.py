"""The conformance table: property x target -> pass / fail / convention:<name> / skipped (reason).

Rows come from the pytest plug-in, one per test phase that decided an outcome:
``{"property", "target", "when", "outcome", "label", "reason"}``.

What a person reads first: ``summary_lines`` (one count per target and kind of result) and, in the
terminal, ``terminal_table`` (long reasons abbreviated; rows where every target was skipped may be
left out). The written CSV/JSON keep every row and the full text.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from harness.verdicts.verdict import KINDS, RANK, RARE_KINDS, decide  # noqa: F401 (KINDS, RARE_KINDS: this module's readers)

def cell(row: dict) -> tuple[int, str, str]:
    """One test result as (severity, text, kind): what ``session_rows.row_of`` decided when the report
    was made (a row built another way, as the self-tests do: ``harness.verdicts.verdict.decide`` now)."""
    if "kind" in row:
        return row["severity"], row["text"], row["kind"]
    return decide(row)


#: the columns of the long table that are written (``kind`` is for the counts, not a report column)
COLUMNS = ["property", "target", "result", "detail"]
#: what the JSON's results carry besides ``COLUMNS``, as data for tools (``harness sweep``): the
#: cell's ``kind`` (``KINDS``), a failure's one-line ``repro`` ("" when it has none), and its time:
#: ``seconds`` of the property's test and ``target_seconds`` of them in the target's calls (None
#: where the test did not run; older reports have neither), and ``error``: per dtype the comparison closest
#: to the edge, ``{"error_ulps", "allowed_ulps", "margin", "comparisons"}`` in ULPs of the output scale
#: (``harness.spec.tolerance.error_summary``; None where nothing was compared)
JSON_EXTRA = ["kind", "repro", "seconds", "target_seconds", "error"]


def long_table(rows: list[dict]) -> pd.DataFrame:
    """One line per (property, target): the worst outcome, its reason and its kind."""
    best: dict[tuple[str, str], tuple[int, str, str, str, str]] = {}
    spent: dict[tuple[str, str], tuple[float, float]] = {}
    errors: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (row["property"], row["target"])
        if row.get("error"):
            errors[key] = row["error"]
        if row.get("seconds") is not None:
            total, inside = spent.get(key, (0.0, 0.0))
            spent[key] = (total + row["seconds"], inside + (row.get("target_seconds") or 0.0))
        rank, text, what = cell(row)
        if key not in best or rank > best[key][0]:
            best[key] = (rank, text, what, row.get("reason") or row.get("unsupported_detail") or "",
                         row.get("repro") or "")
    data = [{"property": p, "target": t, "result": text,
             "detail": reason if rank >= 2 or what == "partial" else "", "kind": what, "repro": repro,
             "seconds": spent.get((p, t), (None, None))[0], "target_seconds": spent.get((p, t), (None, None))[1],
             "error": errors.get((p, t))}
            for (p, t), (rank, text, what, reason, repro) in best.items()]
    return pd.DataFrame(data, columns=COLUMNS + JSON_EXTRA)


def conformance_table(rows: list[dict]) -> pd.DataFrame:
    """Wide table: one row per property, one column per target."""
    df = long_table(rows)
    if df.empty:
        return pd.DataFrame()
    order = list(dict.fromkeys(df["property"]))
    wide = df.pivot(index="property", columns="target", values="result").reindex(order)
    wide.columns.name = None
    return wide


#: the kinds of result counted per target, in the order ``summary_lines`` prints them; partial: checked
#: on the configurations the target supports, the others passed over


def summary_lines(rows: list[dict]) -> list[str]:
    """One line per target, ``<target>: pass 12, convention 3, fail 1, unsupported 2, skipped 61``
    (partial and error only when there is one)."""
    df = long_table(rows)
    lines = []
    for target, kinds in df.groupby("target", sort=False)["kind"]:
        counts = kinds.value_counts()
        shown = [k for k in KINDS if k not in RARE_KINDS or counts.get(k, 0)]
        lines.append(f"{target}: " + ", ".join(f"{k} {int(counts.get(k, 0))}" for k in shown))
    return lines


def all_skipped(long: pd.DataFrame) -> pd.Series:
    """Per property: every target's result is a plain skip (not unsupported)."""
    return long.groupby("property", sort=False)["kind"].agg(lambda k: bool((k == "skipped").all()))


def abbreviate(text, width: int = 40) -> str:
    """``text`` for a narrow cell: a skip for a missing protocol name as ``skipped: no NAME`` (the
    column names the target), anything else cut to ``width`` characters with an ellipsis (the
    full text is in the CSV/JSON)."""
    text = "" if text is None or (isinstance(text, float) and pd.isna(text)) else str(text)
    text = re.sub(r"^skipped \(target '[^']*' has no attribute '([^']*)'\)$", r"skipped: no \1", text)
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def terminal_table(rows: list[dict], hide_skipped: bool | None = None,
                   width: int = 40) -> tuple[pd.DataFrame, int]:
    """The wide table as the terminal shows it: cells abbreviated to ``width`` characters, and with
    ``hide_skipped`` the rows where every target was skipped left out (``None``: hide them when they
    are most of the rows). Returns (table, how many rows were hidden)."""
    wide = conformance_table(rows)
    if wide.empty:
        return wide, 0
    skipped = all_skipped(long_table(rows)).reindex(wide.index, fill_value=False)
    hide = bool(skipped.sum() * 2 > len(wide)) if hide_skipped is None else bool(hide_skipped)
    shown = wide[~skipped] if hide else wide
    return shown.map(lambda c: abbreviate(c, width)), int(skipped.sum()) if hide else 0


def target_line(t) -> str:
    """``- `spec`: file (version V)``: the module's own version, else its distribution's or its
    checkout's (``harness.basics.versions``); nothing about a version when none is known."""
    from harness.basics import versions
    return f"- `{t.spec}`: {t.file}{versions.label(t)}\n"


def timing_table(long: pd.DataFrame) -> pd.DataFrame:
    """Where a run's time went, slowest first: per (property, target) the test's ``seconds``, the
    part in the target's calls (``target_seconds``: its kernels, and the round trips to its worker)
    and the rest (``harness_seconds``: drawing and shrinking, the float64 references, the checks)."""
    timed = long[long["seconds"].notna()][["property", "target", "seconds", "target_seconds"]].copy()
    timed["harness_seconds"] = timed["seconds"] - timed["target_seconds"]
    return timed.sort_values("seconds", ascending=False).round(3).reset_index(drop=True)


#: the columns of errors.csv (``error_table``)
ERROR_COLUMNS = ["property", "target", "dtype", "error_ulps", "allowed_ulps", "margin", "comparisons"]


def error_table(long: pd.DataFrame) -> pd.DataFrame:
    """How close to the edge each (property, target) ran, per dtype: the error of its comparison with the
    largest error / allowed and what it was allowed, in ULPs of the output scale (``margin`` > 1: the
    failure's), closest to the edge first."""
    data = [{"property": r.property, "target": r.target, "dtype": dtype, **{c: e.get(c) for c in ERROR_COLUMNS[3:]}}
            for r in long.itertuples() if isinstance(r.error, dict) for dtype, e in r.error.items()]
    table = pd.DataFrame(data, columns=ERROR_COLUMNS)
    return table.sort_values("margin", ascending=False, kind="stable").reset_index(drop=True)


def write_conformance(rows: list[dict], out_dir, targets=(), consistency=None) -> list[Path]:
    """Write conformance.csv, conformance.md, conformance.json, timing.csv (``timing_table``) and
    errors.csv (``error_table``) into ``out_dir``; with
    ``consistency`` (rows, differential rows: several targets, ``harness.verdicts.consistency``) also
    consistency.csv, and the section in the MD and JSON."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wide = conformance_table(rows)
    long = long_table(rows)
    paths = [out / "conformance.csv", out / "conformance.md", out / "conformance.json", out / "timing.csv"]
    wide.to_csv(paths[0])
    timing_table(long).to_csv(paths[3], index=False)
    paths.append(out / "errors.csv")
    error_table(long).to_csv(paths[-1], index=False)
    header = "# Conformance\n\n" + "".join(target_line(t) for t in targets) + \
        "\n" + "".join(f"- {line}\n" for line in summary_lines(rows))
    records = long[COLUMNS + JSON_EXTRA].astype(object)
    tail, data = "", {"results": records.where(records.notna(), None).to_dict(orient="records")}  # (null, not NaN)
    long = long[COLUMNS]
    if consistency is not None:
        from harness.verdicts import consistency as cons
        section = cons.section_table(*consistency)
        paths.append(out / "consistency.csv")
        section.to_csv(paths[-1], index=False)
        tail = "\n" + cons.markdown(*consistency)
        data["consistency"] = {"summary": cons.summary_line(*consistency),
                               "disagreements": cons.disagreements(*consistency),
                               "rows": section.to_dict(orient="records")}
    paths[1].write_text(header + "\n" + wide.to_markdown() + "\n\n## Failures\n\n" +
                        (long[long.detail != ""].to_markdown(index=False) if (long.detail != "").any()
                         else "none") + "\n" + tail)
    paths[2].write_text(json.dumps(data, indent=1))
    return paths


def rows_of_report(data: dict) -> list[dict]:
    """A written ``conformance.json``'s results as rows again (one decided cell each), so that reports
    are joined and rewritten by the same code that wrote them."""
    return [{"property": r["property"], "target": r["target"], "kind": r["kind"], "severity": RANK.get(r["kind"], 0),
             "text": r["result"], "reason": r.get("detail") or "", "repro": r.get("repro") or "",
             "seconds": r.get("seconds"), "target_seconds": r.get("target_seconds"), "error": r.get("error")}
            for r in data.get("results", [])]


def merge(folders) -> list[dict]:
    """The rows of several reports' folders (the shards of one run, ``harness check --shard``): a
    (property, target) that two of them hold keeps the worse cell, as within one run."""
    rows = []
    for folder in folders:
        path = Path(folder) / "conformance.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: no conformance.json (not a --report folder, or its run did not finish)")
        rows += rows_of_report(json.loads(path.read_text()))
    return rows
