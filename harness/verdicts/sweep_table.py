"""The false-alarm sweep's figures, from the conformance reports its sessions wrote.

One row per (target, profile, seed): how many properties ran, passed, measured a named
convention, were skipped (or unsupported, declared), and the alarms. An *alarm* is a ``fail`` or
``error`` cell of a correct control (``harness.controls``); ``convention:<name>``, passes, skips
and ``unsupported`` are not. The cells are read from ``conformance.json`` (its ``results``: the
``kind`` of each cell and a failure's ``repro``), never from terminal text.

Files (``write``): ``sweep.csv`` and ``sweep.md`` (the rows), ``sweep.json`` (rows, alarms with
their repro lines, targets not run, consistency lines, figures).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pandas as pd

from harness.verdicts.verdict import ALARM_KINDS, legacy_kind

#: the kinds of a cell that ran (checked at least one configuration)
RAN_KINDS = ("pass", "convention", "partial", "fail", "known", "error")
COLUMNS = ["target", "profile", "seed", "status", "run", "passed", "conventions", "skipped", "alarms",
           "alarm_properties", "seconds"]


def kind_of(cell: dict) -> str:
    """A result's kind: the JSON's ``kind`` (``harness.verdicts.verdict``); a report written before it
    carried one is read by ``verdict.legacy_kind``."""
    return cell.get("kind") or legacy_kind(cell["result"])


def rerun_line(spec: str, profile: str, seed: int, prop: str) -> str:
    """The check command that runs ``prop`` of ``spec`` on the same draws (``-k`` on the property's
    own name may select a few more tests)."""
    name = prop.split(".", 1)[-1]
    return (f"python -m harness check --impl {shlex.quote(spec)} --hypothesis-profile {profile} "
            f"-k {shlex.quote(name)} -- --hypothesis-seed={seed}")


def target_row(spec: str, profile: str, seed: int, cells: list[dict], seconds: float | None = None,
               status: str = "ran") -> tuple[dict, list[dict]]:
    """(row, alarms) for one target's cells of one session."""
    kinds = [kind_of(c) for c in cells]
    alarms = [{"property": c["property"], "target": spec, "profile": profile, "seed": seed,
               "result": c["result"], "detail": c.get("detail") or "", "repro": c.get("repro") or "",
               "rerun": rerun_line(spec, profile, seed, c["property"])}
              for c, k in zip(cells, kinds) if k in ALARM_KINDS]
    row = {"target": spec, "profile": profile, "seed": seed, "status": status,
           "run": sum(k in RAN_KINDS for k in kinds),
           "passed": sum(k in ("pass", "partial") for k in kinds),
           "conventions": kinds.count("convention"),
           "skipped": sum(k in ("skipped", "unsupported") for k in kinds),
           "alarms": len(alarms), "alarm_properties": " ".join(a["property"] for a in alarms),
           "seconds": None if seconds is None else round(seconds, 1)}
    return row, alarms


def not_run_row(spec: str, profile: str, seed: int, status: str) -> dict:
    return {"target": spec, "profile": profile, "seed": seed, "status": status, "run": 0, "passed": 0,
            "conventions": 0, "skipped": 0, "alarms": 0, "alarm_properties": "", "seconds": None}


def session_rows(report: dict | None, specs: list[str], profile: str, seed: int, seconds: float,
                 why_missing: str = "") -> tuple[list[dict], list[dict]]:
    """(rows, alarms) of one session over ``specs``: each target's cells of its report, or, when the
    session wrote none (``report`` None: it crashed or pytest could not start), one alarm per
    target saying so (``why_missing``)."""
    rows, alarms = [], []
    results = (report or {}).get("results", [])
    for spec in specs:
        if report is None:
            row, found = target_row(spec, profile, seed, [{"property": "(session)", "result": "error",
                                                           "kind": "error", "detail": why_missing}],
                                    seconds, status="no report")
        else:
            row, found = target_row(spec, profile, seed, [c for c in results if c["target"] == spec], seconds)
        rows.append(row)
        alarms += found
    return rows, alarms


def disagreements(report: dict | None) -> list[str]:
    """The consistency section's disagreements (not alarms: the controls are different libraries)."""
    return list(((report or {}).get("consistency") or {}).get("disagreements") or [])


def figures(rows: list[dict]) -> dict:
    ran = [r for r in rows if r["status"] in ("ran", "no report")]
    runs = {(r["profile"], r["seed"]) for r in rows}
    return {"targets": len({r["target"] for r in ran}),
            "targets_not_run": len({r["target"] for r in rows} - {r["target"] for r in ran}),
            "dev_seeds": len({s for p, s in runs if p == "dev"}),
            "thorough_runs": len({s for p, s in runs if p == "thorough"}),
            "target_runs": len(ran),
            "properties_run": int(sum(r["run"] for r in ran)),
            "alarms": int(sum(r["alarms"] for r in rows))}


def figures_line(fig: dict) -> str:
    """The line for notes/MEASUREMENTS.md: targets x seeds x properties run, alarms."""
    thorough = f" + {fig['thorough_runs']} thorough" if fig["thorough_runs"] else ""
    missing = f" ({fig['targets_not_run']} more not run)" if fig["targets_not_run"] else ""
    return (f"sweep: {fig['targets']} targets{missing} x {fig['dev_seeds']} dev seeds{thorough} = "
            f"{fig['target_runs']} target runs, {fig['properties_run']} property runs, {fig['alarms']} alarms")


def alarm_lines(alarms: list[dict]) -> list[str]:
    lines = []
    for a in alarms:
        lines.append(f"ALARM {a['property']} [{a['target']}] {a['profile']} seed {a['seed']}: {a['result']}: "
                     f"{a['detail'][:300]}")
        if a["repro"]:
            lines.append(f"  repro: {a['repro']}")
        lines.append(f"  rerun: {a['rerun']}")
    return lines


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table (a target that did not run: its seconds blank, not nan)."""
    df = table(rows).astype(object)
    return df.where(df.notna(), "").to_markdown(index=False)


def write(out: Path, rows: list[dict], alarms: list[dict], consistency: list[dict], meta: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    df = table(rows)
    fig = figures(rows)
    paths = [out / "sweep.csv", out / "sweep.md", out / "sweep.json"]
    df.to_csv(paths[0], index=False)
    md = ["# False-alarm sweep", "", figures_line(fig), "", markdown(rows), "", "## Alarms", ""]
    md += [f"- `{a['property']}` on `{a['target']}` ({a['profile']}, seed {a['seed']}): {a['detail'][:300]}"
           f"\n  - repro: `{a['repro'] or '(none recorded)'}`\n  - rerun: `{a['rerun']}`" for a in alarms] or ["none"]
    md += ["", "## Consistency (not alarms)", ""]
    md += [f"- {c['profile']} seed {c['seed']}: {line}" for c in consistency for line in c["lines"]] or ["none"]
    paths[1].write_text("\n".join(md) + "\n")
    paths[2].write_text(json.dumps({**meta, "figures": fig, "figures_line": figures_line(fig), "rows": rows,
                                    "alarms": alarms, "consistency": consistency}, indent=1))
    return paths


def merge(folders: list[Path]) -> tuple[list[dict], list[dict], list[dict], dict]:
    """(rows, alarms, consistency, meta) of several sweeps' folders as one sweep: the shards of a CI
    matrix (``sweep --shard K/N``), or sweeps of other machines. Rows, alarms and consistency lines are
    joined; the meta's targets and profiles are united, ``seconds`` is the longest (shards run side by
    side), ``interrupted`` any, ``commit`` each distinct one; ``shards`` names the folders."""
    rows, alarms, consistency, metas = [], [], [], []
    for folder in folders:
        path = Path(folder) / "sweep.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: no sweep.json (not a sweep's --out folder, or it did not finish)")
        data = json.loads(path.read_text())
        rows += data["rows"]
        alarms += data["alarms"]
        consistency += data["consistency"]
        metas.append(data)

    def union(key):
        seen = []
        for m in metas:
            for x in m.get(key) or []:
                if x not in seen:
                    seen.append(x)
        return seen

    commits = list(dict.fromkeys(str(m.get("commit")) for m in metas))
    keywords = list(dict.fromkeys(m.get("keyword") for m in metas))
    meta = {"commit": commits[0] if len(commits) == 1 else ",".join(commits),
            "interrupted": any(m.get("interrupted") for m in metas), "profiles": union("profiles"),
            "keyword": keywords[0] if len(keywords) == 1 else keywords, "group": metas[0].get("group") if metas else None,
            "targets": union("targets"), "seconds": max((m.get("seconds") or 0 for m in metas), default=0),
            "shards": [str(f) for f in folders]}
    return rows, alarms, consistency, meta
