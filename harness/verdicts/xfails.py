"""Expected failures: a file of the properties known to fail, as array-api-tests' ``xfails.txt``.

    # mykernels: known bugs, each with why
    rope.relative                     # float32 angles, our issue 12
    attention.causal  mykernels       # only for this target (its --impl spec, or a glob)
    norms.*                           # a glob over property names

Passed as ``--xfails FILE`` (``harness check``, the pytest plug-in, ``$HARNESS_XFAILS``). A listed
property that fails is reported XFAIL (the conformance cell reads ``known fail (FILE:LINE)``): the
bug stays visible and the run passes. A failure that is not listed fails the run. A listed property
that passes is XPASS (never a failure) and is named at the end with the line to remove; a line that
matches no property of the run is named too (a typo would otherwise hide nothing and say nothing).

A leaf module: the plug-in reads it; the engine does not.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    """One line: a property glob, a target glob (``*``: every target), the comment, ``FILE:LINE``."""

    property: str
    target: str
    note: str
    where: str

    def matches(self, prop: str, *target_names: str) -> bool:
        """``prop`` of a target known by these names (its spec, its id); a file target matches by
        its path as given, its file name (``kernels.py``) or its stem (``kernels``)."""
        files = [Path(n) for n in target_names if n and n.endswith(".py")]
        names = [n for n in target_names if n] + [p.name for p in files] + [p.stem for p in files]
        return fnmatch.fnmatchcase(prop, self.property) and any(fnmatch.fnmatchcase(n, self.target) for n in names)


class XfailsError(ValueError):
    """The file cannot be read or a line is malformed (a usage error: the run does not start)."""


def parse(text: str, source: str) -> list[Entry]:
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        body, _, note = raw.partition("#")
        fields = body.split()
        if not fields:
            continue
        if len(fields) > 2:
            raise XfailsError(f"{source}:{number}: expected 'PROPERTY [TARGET]  # why', got {raw.strip()!r}")
        prop, target = fields[0], fields[1] if len(fields) == 2 else "*"
        if "." not in prop and not any(c in prop for c in "*?["):
            raise XfailsError(f"{source}:{number}: {prop!r} is not a property name (family.property, "
                              f"as the conformance table's rows: e.g. rope.relative, attention.*)")
        entries.append(Entry(prop, target, note.strip(), f"{Path(source).name}:{number}"))
    return entries


def load(path: str | Path) -> list[Entry]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise XfailsError(f"--xfails: cannot read {str(path)!r}: {exc.strerror or exc}") from None
    return parse(text, str(path))


def find(entries: list[Entry], prop: str, *target_names: str) -> Entry | None:
    """The first line that lists ``prop`` for a target of one of these names (spec, id), or None."""
    return next((e for e in entries if e.matches(prop, *target_names)), None)


def apply(entry: Entry | None, report) -> dict:
    """A call report of a property listed by ``entry``: its failure becomes XFAIL (the row stays a
    failure, marked known: ``{"expected": where}``), its pass XPASS (not strict: never a failure;
    named at the end: ``{"unexpected_pass": where}``); {} when no line lists it."""
    if entry is None:
        return {}
    if report.failed:
        report.outcome = "skipped"
        report.wasxfail = f"known failure ({entry.where})" + (f": {entry.note}" if entry.note else "")
        return {"expected": entry.where}
    if report.passed:
        report.wasxfail = f"listed in {entry.where} but passes"
        return {"unexpected_pass": entry.where}
    return {}


def write_summary(terminalreporter, entries: list[Entry], rows: list[dict]) -> None:
    """What the lines did: known failures seen, listed properties that now pass (the line can go),
    lines that matched no property of this run (a typo, or a property renamed)."""
    known = [r for r in rows if r.get("expected")]
    passing = [r for r in rows if r.get("unexpected_pass")]
    listed = {(r["property"], r["target"]) for r in rows}
    idle = [e for e in entries if not any(e.matches(p, t) for p, t in listed)]
    terminalreporter.write_sep("=", f"expected failures ({len(entries)} line(s) in --xfails)")
    terminalreporter.write_line(f"{len(known)} known failure(s) seen (XFAIL: the run does not fail on them)")
    for r in passing:
        terminalreporter.write_line(f"listed but passes: {r['property']} [{r['target']}] "
                                    f"({r['unexpected_pass']}): remove the line", yellow=True)
    for e in idle:
        terminalreporter.write_line(f"{e.where}: {e.property} {e.target} matches no property of this run "
                                    f"(a typo? a renamed property?)", yellow=True)
