"""The run folder's ``results.jsonl``: one row per point, appended and flushed at once.

Row fields, in the order of notes/RESULTS_SCHEMA.md: key, run_id, suite, case, impl,
device, params, status, reason, metrics, telemetry, time_utc.

``key = "<suite>|<case>|<params as sorted compact JSON>"`` identifies a point across
runs. ``--resume`` keeps the rows whose status is "ok" and measures the rest again:
on opening, the file is rewritten (atomically, via a temporary file) without the
non-ok rows, so every key appears once.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from pathlib import Path
from typing import Any

STATUSES = ("ok", "oom", "error", "nan", "skipped")
FIELDS = ("key", "run_id", "suite", "case", "impl", "device", "params", "status", "reason",
          "metrics", "telemetry", "time_utc")


def make_key(suite: str, case: str, params: dict) -> str:
    return f"{suite}|{case}|{json.dumps(params, sort_keys=True, separators=(',', ':'), default=str)}"


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
             telemetry: dict | None = None) -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    params = _clean(params)
    return {"key": make_key(suite, case, params), "run_id": run_id, "suite": suite, "case": case,
            "impl": impl, "device": device, "params": params, "status": status,
            "reason": reason if status != "ok" else None, "metrics": _clean(metrics or {}),
            "telemetry": _clean(telemetry), "time_utc": now_utc()}


def read_rows(path: Path) -> list[dict]:
    """All parseable rows (a line cut short by a crash is ignored)."""
    rows = []
    if not Path(path).exists():
        return rows
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


class ResultStore:
    """Append-only writer for ``<run_dir>/results.jsonl`` with resume by key."""

    def __init__(self, run_dir: str | os.PathLike, resume: bool = False):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "results.jsonl"
        self.run_id = self.dir.resolve().name
        self.resume = resume
        self.done: dict[str, dict] = {}
        if resume:
            kept = [r for r in read_rows(self.path) if r.get("status") == "ok"]
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
        line = json.dumps(row, separators=(",", ":"), allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        if row["status"] == "ok":
            self.done[row["key"]] = row
        return row

    def rows(self) -> list[dict]:
        return read_rows(self.path)

    def write_json(self, name: str, obj: Any) -> Path:
        path = self.dir / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(_clean(obj), indent=2) + "\n")
        os.replace(tmp, path)
        return path
