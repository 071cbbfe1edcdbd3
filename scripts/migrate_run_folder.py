"""Bring run folders written before result rows had a ``role`` up to the current schema.

    python scripts/migrate_run_folder.py DIR [DIR ...]

Each ``results.jsonl`` in DIR and its immediate sub-folders gets, per row, the ``role`` its suite
gives the case (``TARGET_CASES`` of the suite's module: "target" when the target's own code ran,
else "comparison") and the key ``harness.runfolder.point_key`` builds from it, which names the
target for a target row. The measurements are untouched; the file is replaced atomically. Rows
that have a role keep it (their key is rebuilt, so running the script twice changes nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bench import suites as registry  # noqa: E402
from harness.runfolder import FIELDS, RESULTS, point_key, read_jsonl  # noqa: E402


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+", type=Path)
    args = p.parse_args(argv)
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


if __name__ == "__main__":
    raise SystemExit(main())
