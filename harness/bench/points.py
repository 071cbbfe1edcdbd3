"""Run benchmark points one by one; a failing point is recorded, never fatal.

A suite builds a list of ``Point``s (suite, case, params, ``measure``). For each:
- a point whose key is already "ok" in the store is skipped (``--resume``);
- ``measure()`` returns the metrics dict (or raises ``Skip`` -> status "skipped");
- out of memory (``torch.OutOfMemoryError``, a RuntimeError saying "out of memory",
  ``MemoryError``) -> status "oom"; any other exception -> "error"; a non-finite
  output (``NonFinite``, raised by the measure via ``check_finite``) -> "nan";
  the reason says what happened and where, and the sweep goes on;
- after a failure the exception's frames are cleared (a traceback keeps the failed
  call's locals -- its tensors -- alive) and the device's cached memory is released
  (``torch.cuda.empty_cache``), so the next point starts with the memory free;
- NVML telemetry is sampled around the point on a GPU (``harness.bench.telemetry``);
- the row is appended and fsynced before the next point starts; a suite that measures several
  points together (the CPU scaling sweep) hands each to ``record`` the moment its measurement
  ends, so a kill loses only what was still being measured;
- with a ``deadline`` (``time.perf_counter()`` value; ``harness bench --time-budget-s``),
  a point that would start after it is not run: its row is "skipped" with a reason
  starting with "time budget". The point in flight is never interrupted.
Progress is a tqdm bar whose postfix names the point being measured, when stderr is a terminal
(``progress=None``, the default) or ``progress=True``; otherwise (``harness bench --no-progress``, a
redirected log) one plain line per finished point on stderr, ``[suite] k/N label: ok (1.2 s elapsed)``.
"""
from __future__ import annotations

import gc
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import torch

from harness.basics import extras
from harness.bench.store import ResultStore, make_row, point_key
from harness.bench.telemetry import Telemetry


_ACTIVE: dict = {}  # the progress bar and the point being measured, for ``note``


def note(text: str) -> None:
    """Show what a long point is doing now in the progress bar's postfix (no-op without one)."""
    bar = _ACTIVE.get("bar")
    if bar is not None:
        bar.set_postfix_str(f"{_ACTIVE.get('label', '')} | {text}", refresh=True)


class Skip(Exception):
    """The point cannot run here (no CUDA, the target lacks the name, over the time budget)."""


class NonFinite(Exception):
    """The measured output contains NaN or inf."""


def check_finite(out, what: str = "output") -> None:
    """Raise ``NonFinite`` if any tensor in ``out`` (tensor, tuple, list) has NaN/inf."""
    tensors = out if isinstance(out, (tuple, list)) else [out]
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            bad = (~torch.isfinite(t)).sum().item()
            if bad:
                kind = "NaN" if torch.isnan(t).any().item() else "inf"
                raise NonFinite(f"{what} has {bad} non-finite ({kind}) of {t.numel()} elements")


#: RuntimeError texts of an allocation failure outside torch's caching allocator
#: (cudaMalloc in a library, cuBLAS/cuDNN workspaces)
OOM_TEXTS = ("out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed",
             "cudaerrormemoryallocation")
#: the reason of a point not started because the run's time budget was spent
BUDGET_REASON = "time budget"


def is_oom(exc: BaseException) -> bool:
    cause = exc.__cause__
    if getattr(cause, "type_name", None) is not None:  # raised in the target's worker: by name
        return cause.type_name in ("OutOfMemoryError", "MemoryError") or (
            cause.type_name == "RuntimeError" and any(t in cause.message.lower() for t in OOM_TEXTS))
    if isinstance(exc, MemoryError):
        return True
    oom_cls = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_cls is not None and isinstance(exc, oom_cls):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(t in text for t in OOM_TEXTS)


def release(exc: BaseException) -> None:
    """Drop the locals of ``exc``'s traceback frames (the failed call's tensors); the
    frames' code and line numbers stay, so ``describe_exception`` still works."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def describe_exception(exc: BaseException, limit: int = 400) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    from harness.boundary.guard import ImplementationError
    if isinstance(exc, ImplementationError) and exc.__cause__ is not None:
        exc = exc.__cause__  # the target's error: where the target raised it, not the harness
        if getattr(exc, "where", ""):
            return f"{text} (at {exc.where})"[:limit]
    elif isinstance(exc, ImplementationError):  # the worker was lost: nothing of the target's to show
        return text[:limit]
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        f = frames[-1]
        text += f" (at {f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name})"
    return text[:limit]


def free_memory(device) -> None:
    gc.collect()
    if torch.device(device).type == "cuda" and torch.cuda.is_available():
        try:
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
        except RuntimeError as exc:  # a broken CUDA context: the next point will say so
            print(f"warning: could not release CUDA memory: {exc}", file=sys.stderr)


@dataclass
class Point:
    suite: str
    case: str
    params: dict
    measure: Callable[[], dict]
    #: also written into the row's metrics (e.g. the FLOP count known before running)
    static_metrics: dict = field(default_factory=dict)
    #: True when the measurement already exists (a CPU sweep timed all sizes of the case):
    #: the point is then recorded even after the time budget is spent
    measured: Callable[[], bool] | None = None
    #: "target" when the target's own code runs, "comparison" for the harness's kernels
    role: str = "comparison"

    def key(self, impl: str) -> str:
        """The point's key when measured for the target ``impl`` (harness.verdicts.runfolder.point_key)."""
        return point_key(self.suite, self.case, self.params, self.role, impl)

    def label(self) -> str:
        shown = ",".join(f"{k}={v}" for k, v in self.params.items() if k in ("n", "depth", "kv_heads", "window"))
        return f"{self.case} {shown}".strip()


def progress_wanted(progress: bool | None, stream=None) -> bool:
    """Whether to draw a tqdm bar: ``progress`` when given, else whether ``stream`` (stderr) is a
    terminal -- a bar redrawn into a log file is one line of thousands of characters."""
    if progress is not None:
        return bool(progress)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


class PointRunner:
    def __init__(self, store: ResultStore, impl: str, device: str, *, progress: bool | None = None,
                 verbose: bool = True, deadline: float | None = None, budget_s: float | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.store, self.impl, self.device = store, impl, device
        self.progress = progress_wanted(progress)
        self.verbose = verbose
        self.deadline, self.budget_s, self.clock = deadline, budget_s, clock
        #: key -> row of every point written by this runner (once each)
        self.recorded: dict[str, dict] = {}
        self.desc = "bench"
        self._bar = None
        self._budget_told = False
        self._total, self._written, self._started = 0, 0, clock()
        #: a reason to record every point of the target skipped, unmeasured (an interpreted Triton target)
        self.skip_all: str | None = None

    def over_budget(self) -> bool:
        return self.deadline is not None and self.clock() > self.deadline

    def budget_reason(self) -> str:
        spent = f"{self.budget_s:g} s" if self.budget_s is not None else "the time"
        return f"{BUDGET_REASON}: {spent} of the run spent before this point could start"

    def _row(self, point: Point, status, reason, metrics, telemetry) -> dict:
        return make_row(self.store.run_id, point.suite, point.case, self.impl, self.device, point.params,
                        status=status, reason=reason, metrics=metrics, telemetry=telemetry, role=point.role)

    def record(self, point: Point) -> dict:
        """Measure and write ``point`` now unless this runner wrote it already: what a suite
        calls for each point of a joint measurement as soon as that point's part is done."""
        key = point.key(self.impl)
        return self.recorded[key] if key in self.recorded else self.run_one(point)

    def _write(self, point: Point, row: dict) -> dict:
        key = point.key(self.impl)
        if key in self.recorded:  # written from inside its own measurement (``record``)
            return self.recorded[key]
        self.store.append(row)
        self.recorded[key] = row
        self._written += 1
        if self._bar is not None:
            self._bar.update(1)
        budget = row["status"] == "skipped" and (row["reason"] or "").startswith(BUDGET_REASON)
        lines = self.verbose and not self.progress  # the plain-line progress of a run without a bar
        if lines and row["status"] == "ok":
            print(f"[{self.desc}] {self._done()} {point.label()}: ok "
                  f"({self.clock() - self._started:.1f} s elapsed)",
                  file=sys.stderr, flush=True)
        if self.verbose and row["status"] != "ok" and not (budget and self._budget_told):
            msg = f"[{self.desc}]{' ' + self._done() if lines else ''} {point.label()}: {row['status']}: " \
                  f"{row['reason']}"
            if budget:
                msg += "; the remaining points are recorded as skipped"
                self._budget_told = True
            (self._bar.write(msg, file=sys.stderr) if self._bar is not None else print(msg, file=sys.stderr))
        return row

    def _done(self) -> str:
        """``k/N``: points of this ``run`` written so far, of those it had to do."""
        return f"{self._written}/{self._total or '?'}"

    def run_one(self, point: Point) -> dict:
        status, reason, metrics, telemetry = "ok", None, dict(point.static_metrics), None
        if self.skip_all and point.role == "target":  # the harness's own baselines still run
            return self._write(point, self._row(point, "skipped", self.skip_all, metrics, None))
        if self.over_budget() and not (point.measured is not None and point.measured()):
            return self._write(point, self._row(point, "skipped", self.budget_reason(), metrics, None))
        tel = Telemetry.for_device(self.device)
        failed = False
        try:
            with tel:
                metrics.update(point.measure() or {})
        except KeyboardInterrupt:
            raise
        except Skip as exc:
            status, reason = "skipped", str(exc)
        except NonFinite as exc:
            status, reason, failed = "nan", str(exc), True
            release(exc)
        except BaseException as exc:  # noqa: BLE001 - a hostile target may raise anything
            hint = extras.hint_for(exc)
            if isinstance(exc, SystemExit):
                status, reason = "error", f"SystemExit({exc.code}) raised by the code under test"
            elif hint is not None:  # an optional dependency of the harness is missing: not the code's failure
                status, reason = "skipped", hint
            elif is_oom(exc):
                status, reason = "oom", describe_exception(exc)
            else:
                status, reason = "error", describe_exception(exc)
            failed = True
            release(exc)
        if failed:  # outside the except clause: the exception (and what it held) is gone
            free_memory(self.device)
        telemetry = tel.summary()
        return self._write(point, self._row(point, status, reason, metrics, telemetry))

    def run(self, points: list[Point], desc: str = "bench") -> list[dict]:
        """Measure and write every point not yet done; returns the rows written, in point order."""
        todo = [p for p in points if not self.store.is_done(p.key(self.impl))]
        done = len(points) - len(todo)
        if done and self.verbose:
            print(f"[{desc}] resume: {done} of {len(points)} points already measured", file=sys.stderr)
        self.desc, self._budget_told = desc, False
        self._total, self._written, self._started = len(todo), 0, self.clock()
        if self.progress:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=len(todo), desc=desc, unit="pt", dynamic_ncols=True, leave=True)
            except ImportError:  # tqdm is optional (extra "bench"): a plain line per point instead
                self._bar, self.progress = None, False
                if self.verbose:
                    print(f"[{desc}] no progress bar: {extras.missing_line('tqdm')}", file=sys.stderr)
        try:
            for p in todo:
                if p.key(self.impl) in self.recorded:
                    continue  # written during an earlier point's joint measurement
                if self._bar is not None:
                    self._bar.set_postfix_str(p.label(), refresh=True)
                _ACTIVE.update(bar=self._bar, label=p.label())
                self.run_one(p)
        finally:
            _ACTIVE.clear()
            if self._bar is not None:
                self._bar.close()
            self._bar = None
        return [self.recorded[p.key(self.impl)] for p in todo if p.key(self.impl) in self.recorded]
