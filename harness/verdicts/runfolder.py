"""The benchmark run folder: the one contract between ``harness bench`` (writer) and ``harness
report`` (reader), described in notes/RESULTS_SCHEMA.md. Everything both sides must agree on is
defined here, once: file names, statuses, roles, the point key, the JSON-lines reader and
appender, row validation and the folder lock.

Point key: ``"<suite>|<case>|<params as sorted compact JSON>"`` for the harness's comparison
kernels, and ``"<suite>|<case>@<target id>|<params>"`` for a row of the target's own code (role
"target"), so a user's kernel is never compared with the reference's numbers. A scaling row's
``pass`` parameter (``PASSES``: forward, backward, forward+backward) is in its key except when it
is "fwd": rows written before the passes existed are forward rows without it (``pass_of``), and
their keys, the stored baselines' too, stay what they were. The target id is
the ``--impl`` module path, or a ``.py`` file's name without its folder (a baseline stored from
``~/src/attn.py`` still matches CI's ``/builds/x/attn.py``).
"""
from __future__ import annotations

import fcntl
import json
import os
import warnings
from pathlib import Path
from typing import Callable, Iterator

RESULTS = "results.jsonl"
ENV = "env.json"
#: held (``fcntl.flock``) by the bench that writes the folder; holds its pid and command line
LOCK = ".bench.lock"
#: the acceptance checks a bench printed at its end: [{"name", "passed" (true, false or null: not
#: evaluated), "detail"}]; ``harness run`` reads it, so a failed check is not summarized as "ok"
CHECKS = "checks.json"
#: files a bench writes besides results.jsonl and env.json (removed by ``--overwrite``)
DERIVED = ("fits.json", "receptive_field_grad.csv", "receptive_field_grad_by_case.csv",
           "finetune_seeds.jsonl", CHECKS)


def grad_case(cases) -> str:
    """The receptive-field case whose profile ``receptive_field_grad.csv`` holds: the target's
    sliding window when it was measured, else the Mistral block, else the first case by name."""
    cases = set(cases)
    return "target.sliding_window" if "target.sliding_window" in cases else (
        "mistral_block" if "mistral_block" in cases else sorted(cases)[0])


STATUSES = ("ok", "oom", "error", "nan", "skipped")
#: a point that ran and failed (a regression when the baseline's was ok)
BAD_STATUSES = ("oom", "error", "nan")
#: the start of a skipped point's reason when the sweep stopped at a size whose predicted call time
#: is over the profile's per-call budget: a decision on the machine's speed at that moment
SIZE_CAP_REASON = "size cap"
#: "target": the code under test ran (its SDPA, sliding window, LayerNorm...); "comparison": the
#: harness's own kernels (naive math, torch backends, banded, LSTM, the stock fine-tune)
ROLES = ("target", "comparison")
#: what a scaling point times (its ``pass`` parameter): the forward; the backward alone (its
#: forward run before, untimed); forward and backward together
PASSES = ("fwd", "bwd", "fwd_bwd")
#: the passes in words (summaries, plot titles)
PASS_WORDS = {"fwd": "forward", "bwd": "backward", "fwd_bwd": "forward+backward"}
#: the pass of a row without a ``pass`` parameter (every row written before passes existed)
DEFAULT_PASS = "fwd"
#: the suites whose rows carry a ``pass`` parameter
PASS_SUITES = ("scaling",)
FIELDS = ("key", "run_id", "suite", "case", "role", "impl", "device", "params", "status", "reason",
          "metrics", "telemetry", "time_utc")


class RunFolderError(ValueError):
    """A run folder or file that cannot be used; the message names the path and the problem."""


def target_id(spec: str) -> str:
    """The identity of a target in point keys: a module path as is, a file by its name."""
    spec = str(spec)
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        return os.path.basename(spec.rstrip("/" + os.sep)) or spec
    return spec


def pass_of(params: dict | None) -> str:
    """The pass a row's ``params`` name (``PASSES``); none named: "fwd" (``DEFAULT_PASS``)."""
    return (params or {}).get("pass") or DEFAULT_PASS


def make_key(suite: str, case: str, params: dict, target: str | None = None) -> str:
    """The point key (module doc); ``target`` is the target id of a target row, else None.
    A ``pass`` parameter of "fwd" is left out (the key a forward row had before passes existed)."""
    name = f"{case}@{target}" if target is not None else case
    if params.get("pass") == DEFAULT_PASS:
        params = {k: v for k, v in params.items() if k != "pass"}
    return f"{suite}|{name}|{json.dumps(params, sort_keys=True, separators=(',', ':'), default=str)}"


def point_key(suite: str, case: str, params: dict, role: str, impl: str) -> str:
    """The key of a row of ``role`` measured for the target ``impl`` (its ``--impl`` spec)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return make_key(suite, case, params, target_id(impl) if role == "target" else None)


def row_problem(row) -> str | None:
    """Why ``row`` is not a valid result row, or None."""
    if not isinstance(row, dict):
        return f"a result row must be a JSON object, got {type(row).__name__}"
    missing = [f for f in ("key", "suite", "case", "role", "status", "params") if f not in row]
    if missing:
        hint = " (written before rows had a role: migrate with: python -m harness migrate DIR)" \
            if missing == ["role"] else ""
        return f"a result row needs the field(s) {', '.join(missing)}{hint}"
    for f in ("key", "suite", "case"):
        if not isinstance(row[f], str) or not row[f]:
            return f"field {f!r} must be a non-empty string, got {row[f]!r}"
    if row["status"] not in STATUSES:
        return f"unknown status {row['status']!r} (known: {', '.join(STATUSES)})"
    if row["role"] not in ROLES:
        return f"unknown role {row['role']!r} (known: {', '.join(ROLES)})"
    if not isinstance(row["params"], dict):
        return f"'params' must be an object, got {type(row['params']).__name__}"
    if row["params"].get("pass", DEFAULT_PASS) not in PASSES:
        return f"unknown pass {row['params']['pass']!r} (known: {', '.join(PASSES)})"
    if row.get("metrics") is not None and not isinstance(row["metrics"], dict):
        return f"'metrics' must be an object or null, got {type(row['metrics']).__name__}"
    return None


def _warn_truncated(path: Path, lineno: int, exc: Exception) -> None:
    warnings.warn(f"{path}:{lineno}: skipping a truncated last line ({exc})", stacklevel=3)


def iter_jsonl(path, on_truncated: Callable[[Path, int, Exception], None] | None = _warn_truncated
               ) -> Iterator[tuple[int, object]]:
    """(line number, parsed object) for each non-blank line of a JSON-lines file. A last line that
    does not parse and has no newline is what a kill mid-write leaves: skipped (``on_truncated``
    is told). Any other line that does not parse raises ``RunFolderError``. No file: nothing."""
    path = Path(path)
    if not path.exists():
        return
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path}: cannot read: {exc}") from exc
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line)
        except ValueError as exc:
            if i == len(lines):  # no newline after it: cut short by a kill
                if on_truncated is not None:
                    on_truncated(path, i, exc)
                continue
            raise RunFolderError(f"{path}:{i}: not valid JSON: {exc}") from exc


def read_jsonl(path, on_truncated=_warn_truncated) -> list:
    """All objects of a JSON-lines file (``iter_jsonl``)."""
    return [obj for _, obj in iter_jsonl(path, on_truncated)]


def append_jsonl(path, obj, allow_nan: bool = True) -> None:
    """Append one object as a line and fsync it. A partial last line (a kill mid-write) is cut off
    first, so it never ends up in the middle of the file. ``allow_nan=False``: strict JSON (result
    rows, whose non-finite numbers are written as null)."""
    line = json.dumps(obj, separators=(",", ":"), allow_nan=allow_nan).encode("utf-8") + b"\n"
    with open(path, "a+b") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size:
            fh.seek(max(0, size - 65536))
            tail = fh.read()
            cut = tail.rfind(b"\n")
            partial = tail[cut + 1:]
            if partial:
                try:
                    json.loads(partial)
                    line = b"\n" + line       # a whole object without its newline: keep it
                except ValueError:
                    fh.truncate(size - len(partial))
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


class FolderBusy(RunFolderError):
    """Another process holds the run folder's lock."""


class FolderLock:
    """An exclusive ``fcntl.flock`` on ``<folder>/.bench.lock`` for as long as the object lives (or
    until ``release``). The kernel drops it when the process dies, however it dies, so a killed
    run never leaves the folder locked; the file itself stays (removing it would race)."""

    def __init__(self, folder, argv: list[str] | None = None):
        self.path = Path(folder) / LOCK
        self.fh = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.seek(0)
            holder = self.fh.read().strip() or "unknown pid"
            self.fh.close()
            self.fh = None
            raise FolderBusy(f"{folder} is being written by another harness bench ({holder}); a second "
                             f"run on the same --out would interleave its rows with that run's. Wait "
                             f"for it to finish or choose another --out.") from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"pid {os.getpid()}: {' '.join(argv or [])}".strip() + "\n")
        self.fh.flush()

    def release(self) -> None:
        if self.fh is not None:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
            self.fh.close()
            self.fh = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def locked_by(folder) -> str | None:
    """Who holds ``folder``'s lock (its line: pid and command), or None when nobody does."""
    path = Path(folder) / LOCK
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return fh.read().strip() or "unknown pid"
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return None
