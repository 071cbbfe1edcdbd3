"""``migrate``: bring run folders written before result rows had a ``role`` up to the current schema.

    python -m harness migrate DIR [DIR ...]

Each ``results.jsonl`` in DIR and its immediate sub-folders gets, per row, the ``role`` its suite
gives the case (``TARGET_CASES`` of the suite's module: "target" when the target's own code ran,
else "comparison") and the key ``harness.verdicts.runfolder.point_key`` builds from it, which names the
target for a target row. The measurements are untouched; the file is replaced atomically. Rows
that have a role keep it (their key is rebuilt, so running the script twice changes nothing).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from harness.bench import suites as registry
from harness.verdicts.runfolder import FIELDS, RESULTS, point_key, read_jsonl


def add_parser(sub) -> None:
    p = sub.add_parser("migrate", help="bring old run folders (rows without a role) up to the current schema",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=Path, metavar="DIR")
    p.set_defaults(func=main)


def role_of(suite: str, case: str) -> str:
    if suite not in registry.MODULES:
        raise SystemExit(f"migrate: unknown suite {suite!r}; known: {', '.join(registry.MODULES)}")
    module = registry.module(suite)
    return "target" if case in getattr(module, "TARGET_CASES", ()) else "comparison"


def migrate_row(row: dict) -> dict:
    role = row.get("role") or role_of(row["suite"], row["case"])
    out = {**row, "role": role,
           "key": point_key(row["suite"], row["case"], row.get("params") or {}, role, row.get("impl") or "")}
    return {k: out[k] for k in FIELDS if k in out} | {k: v for k, v in out.items() if k not in FIELDS}


def migrate_file(path: Path) -> tuple[int, int]:
    rows = read_jsonl(path)
    new = [migrate_row(r) for r in rows]
    changed = sum(a != b for a, b in zip(rows, new))
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in new))
    os.replace(tmp, path)
    return len(rows), changed


def main(args) -> int:
    for folder in args.folders:
        files = [f / RESULTS for f in [folder, *sorted(c for c in folder.iterdir() if c.is_dir())]
                 if (f / RESULTS).is_file()] if folder.is_dir() else []
        if not files:
            print(f"migrate: {folder}: no {RESULTS} in it or its sub-folders", file=sys.stderr)
            return 2
        for f in files:
            n, changed = migrate_file(f)
            print(f"{f}: {changed} of {n} rows migrated")
    return 0

