"""The consistency section: several ``--impl`` targets of one session held to each other.

A library that ships several backends (an eager path and a fused kernel) wants each to pass the
suites AND all of them to behave alike. Two parts, built only when two or more targets loaded:

- conventions: for every convention-measuring property (a row whose cell or convention-mismatch
  failure carries the measured value, ``row["convention"]``), whether every target that was
  measured measured the same one: ``backends disagree on sliding_window.window_extent: A w, B w+1``.
  Each target alone may pass with its own named convention; held to each other they disagree.
- differential: ``suites/consistency/`` calls each protocol name the targets share on the
  same seeded inputs and compares the outputs under the tolerance policy (as torch's fused SDPA
  backends are checked against its math backend); its rows (``{"check", "outcome", "reason"}``,
  outcome ``agree`` / ``disagree`` / ``skipped`` / ``error``) come from the plug-in.

``--require-consistent`` makes any disagreement fail the session (exit 1); without it the
section only reports.
"""
from __future__ import annotations

# (pandas is imported where a table is built: the plug-in imports this module in every session)

#: the columns of the written section (consistency.csv, the MD and JSON sections)
COLUMNS = ["part", "item", "result", "detail"]


def convention_rows(rows: list[dict]) -> list[dict]:
    """One entry per convention-measuring property measured on two or more targets:
    ``{"property", "values": {target: measured}, "agree": bool}``, in the table's order."""
    measured: dict[str, dict[str, str]] = {}
    for row in rows:
        value = row.get("convention")
        if value:
            measured.setdefault(row["property"], {})[row["target"]] = value
    return [{"property": p, "values": v, "agree": len(set(v.values())) == 1}
            for p, v in measured.items() if len(v) >= 2]


def disagreement_line(entry: dict) -> str:
    """``backends disagree on PROPERTY: A w, B w+1``."""
    shown = ", ".join(f"{t} {v}" for t, v in entry["values"].items())
    return f"backends disagree on {entry['property']}: {shown}"


def section_table(rows: list[dict], differential: list[dict]):
    """The section as one long table (``COLUMNS``): one line per convention property measured on
    two or more targets, one per differential check."""
    import pandas as pd
    data = []
    for entry in convention_rows(rows):
        values = ", ".join(f"{t} {v}" for t, v in entry["values"].items())
        data.append({"part": "convention", "item": entry["property"],
                     "result": "agree" if entry["agree"] else "disagree", "detail": values})
    for d in differential:
        data.append({"part": "differential", "item": d["check"], "result": d["outcome"],
                     "detail": d.get("reason") or ""})
    return pd.DataFrame(data, columns=COLUMNS)


def disagreements(rows: list[dict], differential: list[dict]) -> list[str]:
    """One line per disagreement (conventions first), empty when the targets agree."""
    lines = [disagreement_line(e) for e in convention_rows(rows) if not e["agree"]]
    lines += [f"backends disagree on {d['check']} outputs: {d.get('reason') or 'differ'}"
              for d in differential if d["outcome"] in ("disagree", "error")]
    return lines


def summary_line(rows: list[dict], differential: list[dict]) -> str:
    conv = convention_rows(rows)
    agree = sum(e["agree"] for e in conv)
    outcomes = [d["outcome"] for d in differential]
    diff = ", ".join(f"{k} {outcomes.count(k)}" for k in ("agree", "disagree", "error", "skipped")
                     if k in ("agree", "disagree") or outcomes.count(k))
    if not differential:
        diff = "none run (suites/consistency/)"
    return f"consistency: conventions agree {agree} of {len(conv)}; differential checks: {diff}"


def terminal_lines(rows: list[dict], differential: list[dict], require: bool) -> list[str]:
    """What the terminal prints under "consistency (targets held to each other)"."""
    lines = [summary_line(rows, differential)]
    bad = disagreements(rows, differential)
    lines += bad
    if bad:
        lines.append(f"--require-consistent: {len(bad)} disagreement(s) fail the session" if require else
                     "(reported, not failed: --require-consistent fails a session whose targets disagree)")
    return lines


def consistency_check(item) -> str | None:
    """The differential check a pytest item of a consistency suite (a module with ``CONSISTENCY =
    True``) is: its ``name`` parameter, the protocol name it compares; None for any other item."""
    if not getattr(getattr(item, "module", None), "CONSISTENCY", False):
        return None
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("name") if callspec else None


def write_terminal(terminalreporter, rows: list[dict], differential: list[dict], require: bool) -> None:
    terminalreporter.write_sep("=", "consistency (targets held to each other)")
    for line in terminal_lines(rows, differential, require):
        terminalreporter.write_line(line, red=line.startswith("backends disagree"))


def disagreement_of(exc: BaseException) -> str | None:
    """A differential check's failure as one line (its AssertionError's first two lines; of an
    exception group, the first AssertionError's); None when it holds no AssertionError (an error)."""
    if getattr(exc, "exceptions", None):  # an exception group (Hypothesis reporting several)
        found = [disagreement_of(e) for e in exc.exceptions]
        return next((f for f in found if f), None)
    if not isinstance(exc, AssertionError):
        return None
    why = str(exc).strip().splitlines()
    return " ".join(why[:2])[:600] if why else "outputs differ"


def differential_row(report, props: dict, short_reason) -> dict | None:
    """A differential check's row from its report: agree (passed), disagree (its outputs differ:
    xfailed, or failed under --require-consistent), skipped (fewer than two targets share the
    name) or error (anything else that failed); None for a phase that decided nothing."""
    if not (report.when == "call" or report.outcome != "passed"):
        return None
    disagree = props.get("harness_consistency_disagree")
    if disagree:
        outcome, reason = "disagree", disagree
    elif report.outcome == "passed":
        outcome, reason = "agree", ""
    elif report.outcome == "skipped":
        outcome, reason = "skipped", short_reason(report)
    else:
        outcome, reason = "error", short_reason(report)
    return {"check": props["harness_consistency"], "outcome": outcome, "reason": reason}


def markdown(rows: list[dict], differential: list[dict]) -> str:
    """The section for conformance.md."""
    table = section_table(rows, differential)
    body = table.to_markdown(index=False) if len(table) else "nothing compared"
    bad = disagreements(rows, differential)
    return ("## Consistency (targets held to each other)\n\n- " + summary_line(rows, differential) + "\n" +
            "".join(f"- {line}\n" for line in bad) + "\n" + body + "\n")
