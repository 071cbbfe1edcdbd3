"""The conformance rows a pytest session collects, and how the terminal shows them.

The plug-in (``harness.plugin``) registers one ``ResultsSink`` per config (a pytester run inside
a session gets its own) and calls ``conformance_summary`` from ``pytest_terminal_summary``.
A row: ``property``, ``target``, ``when``, ``outcome``, ``label``, ``convention``, ``unsupported``,
``unsupported_detail``, ``reason``, ``repro`` (a failure's one-line repro, when it has one),
``seconds`` and ``target_seconds`` (the call phase's duration and the part of it spent in the target's
calls, round trips to its worker included; None for set-up rows), ``error`` (per dtype, the comparison
closest to the edge in ULPs of the output scale: ``harness.spec.tolerance.error_summary``; None where the
call compared nothing), and the verdict: ``kind``, ``text``,
``severity``, decided once when the report is made (``row_of``) and carried to the controller as the
report's one ``harness_row`` user property (``harness.verdicts.conformance_table`` turns rows into the table).
"""
from __future__ import annotations

import json

import pytest

from harness.verdicts.verdict import decide

#: the reason of a skip because the target does not load (an error in the table, not a skip)
NOT_LOADED = "does not load"


#: the report's user property that carries the row (one value: ``row_of``'s dict as JSON, so junit XML
#: carries it readably too)
ROW_KEY = "harness_row"


def row_of(report: pytest.TestReport, facts: dict) -> dict | None:
    """The conformance row of a test phase that decided an outcome (None for a passing set-up or
    tear-down), from the report and what the plug-in learned (``facts``: property, target, and
    the call's label, convention, failure fields, passed-over configurations, xfails line, times).
    Its verdict is decided here, once: ``kind``, ``text`` and ``severity`` (``harness.verdicts.verdict.decide``);
    the conformance table, the sweep and the reports read them."""
    if not (report.when == "call" or report.outcome != "passed"):
        return None
    outcome = report.outcome
    if facts.get("skip_kind") == "not_loaded":
        outcome = "failed"  # an error in the table, not a skip: the target could not be tested
    if facts.get("expected"):
        outcome = "failed"  # a known failure (--xfails): still a failure in the table, marked known
    row = {"property": facts["property"], "target": facts["target"], "when": report.when, "outcome": outcome,
           "reason": short_reason(report, facts),
           **{k: facts.get(k) for k in ("label", "convention", "unsupported", "unsupported_detail", "repro",
                                        "skip_kind", "expected", "unexpected_pass", "seconds", "target_seconds", "error")}}
    row["severity"], row["text"], row["kind"] = decide(row)
    return row


class ResultsSink:
    """Collects this session's conformance rows from the reports (where they are logged: the
    controller under pytest-xdist). Registered per config, so an in-process pytester run's
    reports go to its own rows, never to those of the session that started it."""

    def __init__(self, rows: list[dict], differential: list[dict]):
        self.rows = rows
        self.differential = differential

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "harness_consistency" in props:
            from harness.verdicts.consistency import differential_row
            row = differential_row(report, props, short_reason)
            if row is not None:
                self.differential.append(row)
            return
        if ROW_KEY in props:
            self.rows.append(json.loads(props[ROW_KEY]))


def short_reason(report: pytest.TestReport, facts: dict | None = None) -> str:
    """One line for the table: why it was skipped, or the failure's kind and first message line
    (a ``PropertyFailure``'s fields, in ``facts``; any other failure: its first ``E`` line)."""
    facts = facts or {}
    if report.skipped and isinstance(report.longrepr, tuple) and not facts.get("expected"):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    if report.failed or facts.get("expected"):
        if facts.get("failure_kind"):
            message = facts.get("failure_message")
            return (f"{facts['failure_kind']}: {message}" if message else facts["failure_kind"])[:300]
        text = str(report.longrepr)
        lines = [ln for ln in text.strip().splitlines() if ln.startswith("E ")]
        return (lines[0][1:].strip() if lines else text.strip().splitlines()[-1])[:300] if text.strip() else "failed"
    return ""


def conformance_summary(terminalreporter, config: pytest.Config, rows: list[dict]) -> None:
    undeclared = [(r, r["reason"]) for r in rows if r.get("skip_kind") == "unsupported"
                  and "(undeclared" in r["reason"]]
    undeclared += [(r, r["unsupported_detail"]) for r in rows
                   if "(undeclared" in (r.get("unsupported_detail") or "")]
    if undeclared:  # not a bug, not a pass: the target raised NotImplementedError without declaring it
        terminalreporter.write_sep("=", "unsupported without a declaration (NotImplementedError)")
        for r, why in undeclared:
            terminalreporter.write_line(f"{r['property']} [{r['target']}]: {why}", yellow=True)
    from harness.verdicts.conformance_table import summary_lines, terminal_table
    table, hidden = terminal_table(rows, config.getoption("hide_skipped", None))
    terminalreporter.write_sep("=", "conformance (property x target)")
    terminalreporter.write_line(table.to_markdown() if len(table) else "(every row hidden)")
    if hidden:
        terminalreporter.write_line(f"{hidden} row(s) where every target was skipped are hidden "
                                    f"(--show-skipped shows them; the written report keeps them)")
    for line in summary_lines(rows):
        terminalreporter.write_line(line)
