"""The run folder's writer: ``results.jsonl``, one row per point, appended and fsynced at once.

Row fields, keys, statuses and roles: ``harness.runfolder`` (notes/RESULTS_SCHEMA.md).
``--resume`` keeps the rows whose status is "ok" and measures the rest again: on opening, the
file is rewritten (atomically, via a temporary file) without the non-ok rows, so every key
appears once.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

from harness.runfolder import (FIELDS, RESULTS, STATUSES, append_jsonl, make_key,  # noqa: F401
                               point_key, read_jsonl)

#: the JSON-lines reader, by the name the bench code has used (harness.runfolder.read_jsonl)
read_rows = read_jsonl


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None, tuples -> lists, numpy/torch scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def make_row(run_id: str, suite: str, case: str, impl: str, device: str, params: dict,
             status: str = "ok", reason: str | None = None, metrics: dict | None = None,
             telemetry: dict | None = None, role: str = "comparison") -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    params = _clean(params)
    return {"key": point_key(suite, case, params, role, impl), "run_id": run_id, "suite": suite,
            "case": case, "role": role, "impl": impl, "device": device, "params": params,
            "status": status, "reason": reason if status != "ok" else None,
            "metrics": _clean(metrics or {}), "telemetry": _clean(telemetry), "time_utc": now_utc()}


class ResultStore:
    """Append-only writer for ``<run_dir>/results.jsonl`` with resume by key."""

    def __init__(self, run_dir: str | os.PathLike, resume: bool = False):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS
        self.run_id = self.dir.resolve().name
        self.resume = resume
        self.done: dict[str, dict] = {}
        if resume:
            kept = [r for r in read_jsonl(self.path) if isinstance(r, dict) and r.get("status") == "ok"]
            self.done = {r["key"]: r for r in kept}
            tmp = self.path.with_suffix(".jsonl.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in self.done.values():
                    fh.write(json.dumps(row, separators=(",", ":")) + "\n")
            os.replace(tmp, self.path)
        else:
            self.path.write_text("")

    def is_done(self, key: str) -> bool:
        return key in self.done

    def append(self, row: dict) -> dict:
        append_jsonl(self.path, row, allow_nan=False)
        if row["status"] == "ok":
            self.done[row["key"]] = row
        return row

    def rows(self) -> list[dict]:
        return read_jsonl(self.path)

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(_clean(obj), indent=2) + "\n")
        os.replace(tmp, path)
        return path
