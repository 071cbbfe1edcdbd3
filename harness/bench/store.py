"""The run folder's writer: ``results.jsonl``, one row per point, appended and fsynced at once.

Row fields, keys, statuses and roles: ``harness.verdicts.runfolder`` (notes/RESULTS_SCHEMA.md).

Opening a store takes the folder's lock (``.bench.lock``), held until ``close()`` or the process
ends: a second run on the same folder is refused (``FolderBusy``, naming the holder's pid). A
folder that already holds results is refused too (``FolderExists``) unless

- ``resume``: the rows whose status is "ok" are kept and only the rest is measured again; on
  opening, the file is rewritten (atomically, via a temporary file) without the non-ok rows, so
  every key appears once. Given ``suites`` (the suites this run measures), the rows of every other
  suite are kept whatever their status: this run will not measure them again, so dropping a
  scaling sweep's "oom" or "skipped" rows when a later ``--resume`` run adds kv_cache to the same
  folder (scripts/device/gpu_baseline.sh's bench_checks stage) would lose them for good;
- ``overwrite``: results.jsonl and the derived files (fits, gradient tables, fine-tune seed log)
  are removed first.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from harness.verdicts.gate_rule import time_detectable_metrics
from harness.verdicts.runfolder import (DERIVED, FIELDS, RESULTS, STATUSES, FolderLock, RunFolderError, append_jsonl,
                               point_key, read_jsonl)

#: the store's own names, and the run-folder names the benchmarks and tests import from here
__all__ = ["FolderExists", "ResultStore", "make_row", "now_utc",
           "FIELDS", "STATUSES", "append_jsonl", "point_key", "read_jsonl"]


class FolderExists(RunFolderError):
    """The folder already holds results and neither resume nor overwrite was asked for."""


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


def make_row(run_id: str, suite: str, case: str, impl: str, device: str, params: dict, *,
             status: str = "ok", reason: str | None = None, metrics: dict | None = None,
             telemetry: dict | None = None, role: str = "comparison") -> dict:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    params = _clean(params)
    return {"key": point_key(suite, case, params, role, impl), "run_id": run_id, "suite": suite,
            "case": case, "role": role, "impl": impl, "device": device, "params": params,
            "status": status, "reason": reason if status != "ok" else None,
            "metrics": _clean({**(metrics or {}), **time_detectable_metrics(metrics or {}, device, suite)}),
            "telemetry": _clean(telemetry), "time_utc": now_utc()}


class ResultStore:
    """Append-only writer for ``<run_dir>/results.jsonl`` with resume by key (module doc)."""

    def __init__(self, run_dir: str | os.PathLike, resume: bool = False, overwrite: bool = False,
                 suites=None):
        if resume and overwrite:
            raise ValueError("resume and overwrite exclude each other")
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock(self.dir, sys.argv)
        self.path = self.dir / RESULTS
        self.run_id = self.dir.resolve().name
        self.resume = resume
        self.done: dict[str, dict] = {}
        self.suites = None if suites is None else frozenset(suites)
        try:
            self._open(resume, overwrite)
        except BaseException:
            self.close()
            raise

    def _open(self, resume: bool, overwrite: bool) -> None:
        existing = read_jsonl(self.path)
        if resume:
            rows = [r for r in existing if isinstance(r, dict) and "key" in r]
            self.done = {r["key"]: r for r in rows if r.get("status") == "ok"}
            kept: dict[str, dict] = {}  # every key once; an ok row wins over another row of its key
            for r in rows:
                if r.get("status") == "ok" or (self.suites is not None and r.get("suite") not in self.suites):
                    if kept.get(r["key"], {}).get("status") != "ok" or r.get("status") == "ok":
                        kept[r["key"]] = r
            tmp = self.path.with_suffix(".jsonl.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in kept.values():
                    fh.write(json.dumps(row, separators=(",", ":")) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            return
        if existing and not overwrite:
            raise FolderExists(
                f"{self.dir} already holds {len(existing)} result row(s) of an earlier run. Give --resume "
                f"to keep its ok points and measure only the rest, --overwrite to discard them, or "
                f"another --out.")
        for name in DERIVED:
            (self.dir / name).unlink(missing_ok=True)
        self.path.write_text("")

    def close(self) -> None:
        """Release the folder's lock (the rows are on disk already)."""
        self.lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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
