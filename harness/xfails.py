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
        its path as given or by its file name (``kernels.py``)."""
        names = [n for n in target_names if n] + [Path(n).name for n in target_names if n and "/" in n]
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
