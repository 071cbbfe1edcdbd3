"""Read run folders (see notes/RESULTS_SCHEMA.md) and pytest-benchmark JSON into one tidy table.

``load_runs(paths)`` -> ``[Run]``; ``tidy(runs)`` -> a DataFrame with one row per (point, metric)::

    run_id, machine, key, suite, case, role, impl, device, <param columns: n, window, ...>,
    status, reason, metric, value

The row contract (fields, statuses, roles, keys, the JSON-lines reader) is ``harness.verdicts.runfolder``:
a row that breaks it -- an unknown status, no role, params that are not an object -- is an
``InputError`` naming the file and line, never a silent pass.

A point without any numeric metric (an error, an oom) still has one row, with ``metric`` and
``value`` missing, so every point's status is in the table. Within one run the last row of a key
wins (a resumed run appends). Parameter names that collide with a fixed column get a ``param_``
prefix. Non-numeric metrics are dropped; a two-number list ``m: [lo, hi]`` becomes ``m_lo``/``m_hi``,
a dict ``m: {a: ..}`` becomes ``m.a``; telemetry becomes ``telemetry.<name>``. A point's stored
repeats (``time_samples_s``) are not columns: ``point_samples(runs)`` returns them. A row of a suite
with passes (``harness.verdicts.runfolder.PASS_SUITES``: scaling) written before passes existed has no
``pass`` parameter: its ``pass`` column says "fwd", what it measured.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.verdicts.runfolder import DEFAULT_PASS, ENV, PASS_SUITES, RESULTS, iter_jsonl, make_key, pass_of, row_problem
from harness.verdicts.runfolder import RunFolderError as InputError

#: metrics that hold a point's repeats (lists): not table columns, ``point_samples(runs)``
SAMPLE_METRICS = ("time_samples_s",)
FIXED = ["run_id", "machine", "key", "suite", "case", "role", "impl", "device"]
TRAILING = ["status", "reason", "metric", "value"]


@dataclass
class Run:
    path: Path
    run_id: str
    env: dict = field(default_factory=dict)
    results: list[dict] = field(default_factory=list)
    fits: dict = field(default_factory=dict)
    rf_grad: pd.DataFrame | None = None
    conformance: pd.DataFrame | None = None
    #: conformance/errors.csv: per (property, target, dtype) the error closest to the edge, in ULPs
    errors: pd.DataFrame | None = None
    kind: str = "run"  # "run" or "pytest-benchmark"

    @property
    def machine(self) -> str:
        return machine_name(self.env)

    def asked_for(self, suite: str, case: str, pass_: str = DEFAULT_PASS) -> bool:
        """Whether this run was asked to measure ``case`` of ``suite`` in ``pass_`` (env.json's
        ``suites``, ``cases`` and ``passes``, as ``harness bench`` records them; a run that does not
        say: everything, except that a run recorded before passes existed timed the forward only)."""
        if self.kind == "pytest-benchmark":
            return suite == "pytest-benchmark"
        suites, cases = self.env.get("suites"), self.env.get("cases")
        passes = self.env.get("passes", [DEFAULT_PASS] if self.env.get("suites") is not None else None)
        return (not isinstance(suites, list) or suite in suites) and \
            (not isinstance(cases, list) or not cases or case in cases) and \
            (suite not in PASS_SUITES or not isinstance(passes, list) or pass_ in passes)


def machine_name(env: dict) -> str:
    parts = [str(env[k]) for k in ("hostname", "device_name") if env.get(k)]
    return "/".join(parts) or "unknown"


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc


def read_results(path: Path) -> list[dict]:
    """results.jsonl -> rows, each checked against the row contract (``harness.verdicts.runfolder``); a
    truncated LAST line (a kill mid-write) is skipped with a warning."""
    rows = []
    for i, row in iter_jsonl(path):
        problem = row_problem(row)
        if problem:
            raise InputError(f"{path}:{i}: {problem}")
        rows.append(row)
    return rows


def load_run_folder(path: Path) -> Run:
    results = path / RESULTS
    if not results.is_file():
        raise InputError(f"{path}: not a run folder (no {RESULTS})")
    env = {}
    if (path / ENV).is_file():
        env = _read_json(path / ENV, ENV)
        if not isinstance(env, dict):
            raise InputError(f"{path / ENV}: not a JSON object")
    else:
        warnings.warn(f"{path}: no env.json; machine is 'unknown'", stacklevel=2)
    run = Run(path=path, run_id=path.name, env=env, results=read_results(results))
    if (path / "fits.json").is_file():
        run.fits = _read_json(path / "fits.json", "fits.json")
    grad = path / "receptive_field_grad.csv"
    if grad.is_file():
        run.rf_grad = pd.read_csv(grad)
        missing = {"depth", "distance", "grad_norm"} - set(run.rf_grad.columns)
        if missing:
            raise InputError(f"{grad}: missing columns {sorted(missing)}")
    conf = path / "conformance" / "conformance.csv"
    if conf.is_file():
        run.conformance = pd.read_csv(conf, index_col=0)
    errors = path / "conformance" / "errors.csv"
    if errors.is_file():
        run.errors = pd.read_csv(errors)
    return run


def load_pytest_benchmark(path: Path) -> Run:
    """pytest-benchmark's --benchmark-json output -> a Run with suite 'pytest-benchmark' rows."""
    data = _read_json(path, "pytest-benchmark JSON")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: not a run folder and not pytest-benchmark JSON (no 'benchmarks' list)")
    info = data.get("machine_info") or {}
    cpu = info.get("cpu") or {}
    env = {"hostname": info.get("node"), "device_name": cpu.get("brand_raw") or info.get("processor"),
           "python": info.get("python_version"), "cpu": cpu.get("brand_raw"),
           "cpu_count": cpu.get("count"), "time_utc": data.get("datetime"),
           "git_commit": (data.get("commit_info") or {}).get("id"),
           "pytest_benchmark": data.get("version")}
    rows = []
    for b in data["benchmarks"]:
        stats = b.get("stats") or {}
        if "name" not in b or "median" not in stats:
            raise InputError(f"{path}: a benchmark needs 'name' and 'stats.median'")
        params = {k: v for k, v in (b.get("params") or {}).items() if _scalar(v)}
        metrics = {"time_s": stats["median"], "time_iqr_s": stats.get("iqr"),
                   "time_min_s": stats.get("min"), "time_mean_s": stats.get("mean"),
                   "time_stddev_s": stats.get("stddev"), "repeats": stats.get("rounds")}
        metrics.update({k: v for k, v in (b.get("extra_info") or {}).items() if k not in metrics})
        # the user's own benchmarks: role "target", keyed by the benchmark's name (its test id)
        rows.append({"key": make_key("pytest-benchmark", b["name"], params), "role": "target",
                     "suite": "pytest-benchmark", "case": b["name"], "impl": b.get("group") or "pytest-benchmark",
                     "device": str(params.get("device", "cpu")), "params": params, "status": "ok",
                     "reason": None, "metrics": metrics})
    return Run(path=path, run_id=path.stem, env=env, results=rows, kind="pytest-benchmark")


def load(path) -> Run:
    path = Path(path)
    if path.is_dir():
        return load_run_folder(path)
    if path.is_file():
        return load_pytest_benchmark(path)
    raise InputError(f"{path}: no such run folder or pytest-benchmark JSON file")


def expand(paths) -> list[Path]:
    """Each path, and for a folder also its immediate sub-folders that are run folders (the main
    job's ``OUT/finetune``, ``bench --devices``' ``OUT/worker<i>_<device>``, a baseline's parts).
    A folder with neither results.jsonl nor such sub-folders is an error; a folder named twice
    is read once."""
    out: dict[Path, Path] = {}
    for p in map(Path, paths):
        found = [p] if not p.is_dir() or (p / RESULTS).is_file() else []
        if p.is_dir():
            found += sorted(c for c in p.iterdir() if c.is_dir() and (c / RESULTS).is_file())
            if not found:
                raise InputError(f"{p}: not a run folder (no {RESULTS}, no sub-folder with one)")
        for f in found:
            out.setdefault(f.resolve(), f)
    return list(out.values())


def load_runs(paths) -> list[Run]:
    runs = [load(p) for p in expand(paths)]
    seen: dict[str, int] = {}
    for run in runs:  # two folders with the same name (different parents) stay apart
        n = seen.get(run.run_id, 0)
        seen[run.run_id] = n + 1
        if n:
            run.run_id = f"{run.run_id}#{n + 1}"
    return runs


def requested(runs: list[Run]):
    """``(suite, case, pass_="fwd") -> bool``: whether any of ``runs`` was asked for that point's
    suite, case and pass."""
    return lambda suite, case, pass_=DEFAULT_PASS: any(run.asked_for(suite, case, pass_) for run in runs)


def _scalar(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def flatten_metrics(metrics: dict | None, telemetry: dict | None = None) -> dict[str, float]:
    out: dict[str, float] = {}

    def put(name, v):
        if isinstance(v, bool):
            out[name] = float(v)
        elif isinstance(v, (int, float)):
            out[name] = float(v)
        elif isinstance(v, (list, tuple)) and len(v) == 2 and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            out[f"{name}_lo"], out[f"{name}_hi"] = float(v[0]), float(v[1])
        elif isinstance(v, dict):
            for k, x in v.items():
                put(f"{name}.{k}", x)

    for k, v in (metrics or {}).items():
        if k not in SAMPLE_METRICS:  # a point's repeats: ``samples``, not table columns
            put(k, v)
    for k, v in (telemetry or {}).items():
        put(f"telemetry.{k}", v)
    return out


def samples(metrics: dict | None) -> dict[str, list[float]]:
    """A row's stored repeats (``SAMPLE_METRICS``), as lists of finite floats."""
    out = {}
    for name in SAMPLE_METRICS:
        v = (metrics or {}).get(name)
        if isinstance(v, list):
            xs = [float(x) for x in v if isinstance(x, (int, float)) and not isinstance(x, bool)
                  and math.isfinite(x)]
            if xs:
                out[name] = xs
    return out


def latest_points(run: Run) -> list[dict]:
    """The run's rows, one per key (the last one written wins)."""
    by_key: dict[str, dict] = {}
    for row in run.results:
        by_key.pop(row["key"], None)
        by_key[row["key"]] = row
    return list(by_key.values())


def point_samples(runs: list[Run]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(run_id, key) -> the point's stored repeats (``samples``), for the gate's rank test."""
    return {(run.run_id, row["key"]): found for run in runs for row in latest_points(run)
            if (found := samples(row.get("metrics")))}


def tidy(runs: list[Run]) -> pd.DataFrame:
    records, param_names = [], {}
    for run in runs:
        for row in latest_points(run):
            params = {}
            raw = dict(row.get("params") or {})
            if row["suite"] in PASS_SUITES:
                raw["pass"] = pass_of(raw)
            for k, v in raw.items():
                if not _scalar(v):
                    v = json.dumps(v, sort_keys=True)
                name = f"param_{k}" if k in FIXED or k in TRAILING else k
                params[name] = v
                param_names.setdefault(name, None)
            base = {"run_id": run.run_id, "machine": run.machine, "key": row["key"],
                    "suite": row["suite"], "case": row["case"], "role": row["role"],
                    "impl": row.get("impl") or "",
                    "device": row.get("device") or "", **params,
                    "status": row["status"], "reason": row.get("reason")}
            metrics = flatten_metrics(row.get("metrics"), row.get("telemetry"))
            if not metrics:
                records.append({**base, "metric": None, "value": math.nan})
            for m, v in metrics.items():
                records.append({**base, "metric": m, "value": v})
    columns = FIXED + list(param_names) + TRAILING
    df = pd.DataFrame({c: pd.Series([r.get(c) for r in records], dtype=object) for c in columns})
    for name in param_names:
        df[name] = _normalize(df[name])
    for name in FIXED + ["status", "reason", "metric"]:
        df[name] = df[name].astype("string")
    df["value"] = df["value"].astype("float64")
    return df


def _normalize(col: pd.Series) -> pd.Series:
    """A parameter column with one type: Int64, Float64, boolean or string (missing = <NA>)."""
    vals = [v for v in col if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if vals and all(isinstance(v, bool) for v in vals):
        return col.astype("boolean")
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return col.astype("Int64")
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return col.astype("Float64")
    return col.map(lambda v: v if v is None or isinstance(v, str) else str(v)).astype("string")


def param_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c not in FIXED and c not in TRAILING]


def points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, point): the fixed columns, params, status and reason."""
    cols = FIXED + param_columns(df) + ["status", "reason"]
    return df.drop_duplicates(["run_id", "key"])[cols].reset_index(drop=True)
