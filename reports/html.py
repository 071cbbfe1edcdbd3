"""One self-contained HTML page: plots as base64 PNG data URIs, tables as HTML, inline CSS, no external
assets. A reader sees the verdict and the plots first, the detail on request, the environment last:
1. the verdict: the gate's banner and its regressions (with a baseline), each run's conformance
   counts per target, the points per suite and status;
2. one section per suite: its plots, then its narrow per-point table (and the skipped points
   counted by reason) folded in a ``<details>``;
3. each run's conformance table, folded;
4. the baseline comparison: counts, the rows that moved, the unchanged ones folded;
5. the environment.
Target rows read under the target's name (``my_attn.py (sdpa)``, ``reports.glance``) in every table.

A tiny inline script records, after load, how many ``<img>`` decoded and are visible:
``<body data-images-loaded="k" data-images-total="n">`` (read by tests/test_html_render.py via
chromium --dump-dom).
"""
from __future__ import annotations

import base64
import html
import re
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from harness.verdicts.conformance_table import KINDS, RARE_KINDS
from harness.verdicts.gate_rule import NOISE_SIGMAS, verdict_kind
from harness.reports.glance import common_text, named_cases, narrow

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px 32px;color:#222;
     background:#fff;max-width:1400px}
h1{margin-bottom:4px} h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
.meta{color:#666;font-size:13px}
table{border-collapse:collapse;font-size:12px;margin:8px 0 16px 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#eef2f7} tr:nth-child(even) td{background:#fafafa}
td.bad{background:#f8d0d0 !important;color:#900;font-weight:bold}
td.good{background:#d5f0d5 !important;color:#060}
td.warn{background:#fff1c9 !important}
.banner{padding:10px 16px;border-radius:6px;margin:12px 0;font-weight:bold}
.banner.bad{background:#f8d0d0;border:1px solid #d66;color:#800}
.banner.good{background:#d5f0d5;border:1px solid #6a6;color:#050}
figure{margin:12px 0 20px 0} figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:13px;color:#555}
.scroll{overflow-x:auto} details summary{cursor:pointer;color:#246}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images), ok = 0;
  imgs.forEach(function (im) {
    var r = im.getBoundingClientRect(), s = window.getComputedStyle(im);
    if (im.complete && im.naturalWidth > 0 && r.width > 0 && r.height > 0 &&
        s.visibility !== 'hidden' && s.display !== 'none') { ok += 1; }
  });
  document.body.setAttribute('data-images-loaded', String(ok));
  document.body.setAttribute('data-images-total', String(imgs.length));
});
"""

_BAD = ("regression", "oom", "error", "nan", "fail", "still failing", "mismatch")
_GOOD = ("improvement", "fixed", "pass")
_WARN = ("skipped", "missing", "new", "undecided")


def _esc(text) -> str:
    return html.escape(str(text))


def table_html(table: pd.DataFrame, max_rows: int = 500) -> str:
    if table is None or table.empty:
        return "<p><em>(none)</em></p>"
    shown = table.head(max_rows).astype(object).where(table.head(max_rows).notna(), "")
    text = shown.to_html(index=False, escape=True, border=0,
                         float_format=lambda x: f"{x:.4g}")
    for words, cls in ((_BAD, "bad"), (_GOOD, "good"), (_WARN, "warn")):
        alt = "|".join(re.escape(w) for w in words)
        text = re.sub(rf"<td>((?:{alt})(?:\b[^<]*)?)</td>", rf'<td class="{cls}">\1</td>', text)
    more = f"<p class='meta'>{len(table) - max_rows} more rows in the CSV/Parquet files.</p>" \
        if len(table) > max_rows else ""
    return f"<div class='scroll'>{text}</div>{more}"


def img_html(path: Path, title: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f"<figure><img alt='{_esc(title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{_esc(title)}</figcaption></figure>")


def folded(summary: str, parts: list[str], open_: bool = False) -> str:
    """``parts`` inside a ``<details>`` whose ``<summary>`` reads ``summary`` (closed unless ``open_``)."""
    return (f"<details{' open' if open_ else ''}><summary>{_esc(summary)}</summary>\n" + "\n".join(parts) +
            "\n</details>")


def suite_html(suite: str, table: pd.DataFrame) -> list[str]:
    """A suite's narrow table (``reports.glance``), folded: the values common to every row in one
    line, the rows, and the skipped points as one count per reason (never one row each)."""
    g = narrow(table, suite)
    parts = [f"<p class='meta'>{_esc(common_text(g.common))}</p>"] if g.common else []
    parts.append(table_html(g.table))
    if len(g.skipped):
        parts += [f"<p class='meta'>skipped: {int(g.skipped['points'].sum())} point(s), by reason</p>",
                  table_html(g.skipped)]
    return [folded(f"{len(g.table)} point(s): the table", parts)]


def _kind(text) -> str:
    """The kind of a conformance cell's text (``harness.verdicts.conformance_table.KINDS``)."""
    text = "" if pd.isna(text) else str(text)
    first = re.split(r"[ :;(]", text, maxsplit=1)[0]
    if first in ("pass", "convention") and ";" in text:
        return "partial"
    return first if first in KINDS else "skipped"


def conformance_counts(table: pd.DataFrame) -> pd.DataFrame:
    """One row per target of a conformance table (property x target): how many cells of each kind."""
    rows = []
    for target in table.columns:
        counts = table[target].map(_kind).value_counts()
        rows.append({"target": target, **{k: int(counts.get(k, 0)) for k in KINDS
                                          if k not in RARE_KINDS or counts.get(k, 0)}})
    return pd.DataFrame(rows).fillna(0)


def comparison_view(table: pd.DataFrame) -> pd.DataFrame:
    """A comparison table as a person reads it: the target's rows under the target's name (its point
    key names it), no direction column."""
    return named_cases(table.drop(columns=["direction"], errors="ignore"))


def env_table(runs) -> pd.DataFrame:
    keys = list(dict.fromkeys(k for r in runs for k in r.env))
    rows = []
    for k in keys:
        row = {"field": k}
        for r in runs:
            v = r.env.get(k)
            row[r.run_id] = ", ".join(f"{a}: {b}" for a, b in v.items()) if isinstance(v, dict) \
                else " ".join(map(str, v)) if isinstance(v, list) else ("" if v is None else v)
        rows.append(row)
    return pd.DataFrame(rows, columns=["field"] + [r.run_id for r in runs])


#: what the conformance errors table says (``harness.verdicts.conformance_table.error_table``)
ERRORS_NOTE = ("<p class='meta'>Each property's comparison with the largest error / allowed, per dtype: the error "
               "and the tolerance it was held to in ULPs of the output scale (the dtype's spacing at 1 times "
               "max(1, max |reference|)); margin = error / allowed, above 1 a failure.</p>")


def render(*, runs, df: pd.DataFrame, tables: dict, plots=(), comparison: pd.DataFrame | None = None,
           baseline: str | None = None, title: str = "Benchmark report") -> str:
    parts = [f"<h1>{_esc(title)}</h1>",
             f"<p class='meta'>generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from "
             f"{', '.join(_esc(r.run_id) + ' (' + _esc(r.machine) + ')' for r in runs)}</p>"]
    # 1. the verdict
    if comparison is not None:
        regs = comparison[comparison["verdict"] == "regression"]
        if len(regs):
            parts += [f"<div class='banner bad'>{len(regs)} regression(s) against the baseline "
                      f"{_esc(baseline)}</div>", "<h2 id='regressions'>Regressions</h2>",
                      table_html(comparison_view(regs))]
        else:
            parts.append(f"<div class='banner good'>No regression against the baseline "
                         f"{_esc(baseline)}.</div>")
    pts = df.drop_duplicates(["run_id", "key"])
    status = pts.groupby(["suite", "status"]).size().unstack(fill_value=0).reset_index()
    status.columns.name = None
    parts += ["<h2 id='summary'>Summary</h2>"]
    for run in runs:
        if run.conformance is not None:
            parts += [f"<p>Conformance ({_esc(run.run_id)}): {len(run.conformance)} properties, per target:</p>",
                      table_html(conformance_counts(run.conformance))]
    parts += [f"<p>{len(pts)} points in {len(runs)} run(s).</p>", table_html(status)]
    # 2. the plots, each suite's per-point table folded below them
    sections = list(dict.fromkeys(list(tables) + [p.section for p in plots]))
    for suite in sections:
        parts.append(f"<h2 id='suite-{_esc(suite)}'>{_esc(suite)}</h2>")
        parts += [img_html(p.path, p.title) for p in plots if p.section == suite]
        if suite in tables:
            parts += suite_html(suite, tables[suite])
    # 3. the conformance tables, folded
    for run in runs:
        if run.conformance is not None:
            table = run.conformance.reset_index().rename(columns={"index": "property"})
            parts += [f"<h2 id='conformance-{_esc(run.run_id)}'>Conformance ({_esc(run.run_id)})</h2>",
                      folded(f"{len(table)} properties x {len(run.conformance.columns)} target(s): the table",
                             [table_html(table)])]
            if run.errors is not None and len(run.errors):
                parts.append(folded(f"error against float64, per property, target and dtype ({len(run.errors)} "
                                    f"rows, closest to the edge first)", [ERRORS_NOTE, table_html(run.errors)]))
    # 4. the baseline comparison
    if comparison is not None:
        counts = comparison["verdict"].map(verdict_kind).value_counts().rename_axis("verdict").reset_index(name="rows")
        notable = comparison[comparison["verdict"] != "ok"]
        steady = comparison[comparison["verdict"] == "ok"]
        parts += [f"<h2 id='comparison'>Baseline comparison ({_esc(baseline)})</h2>",
                  "<p class='meta'>ratio = current / baseline; allowed = max(floor, 2 &times; the "
                  "relative spread of the noisier run): the slowdown the point can detect; a time "
                  f"regression must also exceed {NOISE_SIGMAS:g} robust sd of the run's machine noise (the comparison "
                  "kernels' own log time ratios); undecided: too noisy for the gate's stated slowdown "
                  "or for the machine's noise, or memory below the probe's resolution "
                  "(fails the gate only with --strict).</p>", table_html(counts),
                  table_html(comparison_view(notable)),
                  folded(f"{len(steady)} unchanged (within the noise)", [table_html(comparison_view(steady))])]
    # 5. the environment, last
    parts += ["<h2 id='environment'>Environment</h2>", table_html(env_table(runs))]
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n{body}\n<script>{SCRIPT}</script>\n</body></html>\n")


def write_html(path, **kwargs) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(**kwargs), encoding="utf-8")
    return path
