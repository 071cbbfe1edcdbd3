"""The verdict of one test phase of a property on a target: its kind, decided in ONE place (``decide``).

A row (``harness.verdicts.session_rows``) carries what the plug-in recorded as data when the report was
made: the outcome, the phase, the label (a named convention), the configurations passed over, the
kind of a skip (``skip_kind``: ``unsupported`` when the target declared a feature out or raised
NotImplementedError, ``not_loaded`` when it could not be imported, else a plain skip) and a known
failure's xfails line. ``decide`` turns that into (severity, text, kind); the conformance table, the
sweep and the reports read the kind, never the text.

``legacy_kind`` is the one reader of fixed spellings, for ``conformance.json`` files written before
their cells carried a ``kind`` and rows written before ``skip_kind``.
"""
from __future__ import annotations

#: every kind of cell, in the summary's order
KINDS = ("pass", "convention", "partial", "fail", "known", "error", "unsupported", "skipped")
#: kinds shown in the summary only when present
RARE_KINDS = ("partial", "known", "error")
#: the kinds that are failures of a correct control (the sweep's alarms)
ALARM_KINDS = ("fail", "error")
#: severity: the worst phase of a (property, target) is its cell
RANK = {"fail": 3, "error": 3, "known": 2, "unsupported": 1, "skipped": 1, "partial": 0, "convention": 0, "pass": 0}
#: a skip's kinds (``skip_kind``)
UNSUPPORTED, NOT_LOADED = "unsupported", "not_loaded"


def decide(row: dict) -> tuple[int, str, str]:
    """One row as (severity, text, kind) for the table."""
    outcome = row["outcome"]
    if outcome == "skipped" and row.get("skip_kind") == NOT_LOADED:
        outcome = "failed"  # the target could not be tested: an error of the setup phase
    if outcome == "failed":
        if row.get("expected"):  # listed in --xfails: visible, not a failure of the run
            return RANK["known"], f"known fail ({row['expected']})", "known"
        kind = "fail" if row["when"] == "call" else "error"
        return RANK[kind], kind, kind
    if outcome == "skipped":
        reason = row.get("reason") or "no reason"
        skip_kind = row.get("skip_kind") or legacy_kind(reason)
        if skip_kind == UNSUPPORTED:  # the target's own declaration, or its NotImplementedError
            return RANK["unsupported"], reason, "unsupported"
        return RANK["skipped"], f"skipped ({reason})", "skipped"
    text = row.get("label") or "pass"
    if row.get("unexpected_pass"):
        text += f" (listed in {row['unexpected_pass']}: remove the line)"
    note = row.get("unsupported")  # configurations passed over: declared or NotImplementedError
    if note:
        return 0, f"{text}; {note}", "partial"
    return 0, text, "convention" if row.get("label") else "pass"


def legacy_kind(text: str) -> str:
    """The kind of a cell or skip reason written before kinds were recorded (old files only)."""
    if text in ALARM_KINDS:
        return text
    if text.startswith("unsupported ("):
        return "unsupported"
    if text.startswith("skipped"):
        return "skipped"
    if ";" in text:
        return "partial"
    return "convention" if text.startswith("convention:") else "pass"
