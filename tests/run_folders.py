"""Synthetic run folders for the report and gate tests, written by hand to the schema in
notes/RESULTS_SCHEMA.md (no dependency on the bench code: the keys are spelled out here, so a
change of the contract on one side fails these tests)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

NS = [256, 512, 1024, 2048, 4096]


#: cases that run the target's code in these synthetic runs (role "target")
TARGET_CASES = ("target.sdpa", "target.sliding_window", "mha", "gqa", "mqa")


def key_of(suite, case, params, role="comparison", impl="reference"):
    """``<suite>|<case>|<params>``, and ``<suite>|<case>@<target>|<params>`` for a target row."""
    target = impl.rsplit("/", 1)[-1]
    name = f"{case}@{target}" if role == "target" else case
    return f"{suite}|{name}|{json.dumps(params, sort_keys=True, separators=(',', ':'))}"


def _row(run_id, suite, case, params, metrics, status="ok", reason=None, impl="reference", role=None):
    role = role or ("target" if case in TARGET_CASES else "comparison")
    return {"key": key_of(suite, case, params, role, impl), "run_id": run_id, "suite": suite, "case": case,
            "role": role, "impl": impl, "device": "cpu", "params": params, "status": status,
            "reason": reason, "metrics": metrics, "telemetry": None, "time_utc": "2025-01-01T00:00:00Z"}


def read(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def write(run: Path, rows: list[dict]) -> None:
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_run(root: Path, name: str, *, host="hostA", slow=1.0, iqr=0.05, status=None, rf_off=0,
             extra_rows=(), jitter=None, impl="reference", env_extra=None) -> Path:
    """A run folder with scaling / receptive_field / kv_cache / finetune points of target ``impl``.

    ``slow`` multiplies every time (``jitter``: a dict n -> factor on top), ``iqr`` is the relative
    IQR, ``status`` maps (case, n) -> (status, reason) for scaling points, ``rf_off`` shifts the
    measured receptive field away from its formula; ``env_extra`` is merged into env.json."""
    run = root / name
    (run / "conformance").mkdir(parents=True)
    env = {"harness_version": "0.1.0", "git_commit": "abc123", "time_utc": "2025-01-01T00:00:00Z",
           "hostname": host, "python": "3.11", "torch": "2.13", "cuda": None, "device_name": "cpu",
           "driver": None, "cpu": "Synthetic CPU", "cpu_count": 2,
           "peak_tflops_measured": {"float32": 0.1}, "argv": ["bench"], "impl": impl, **(env_extra or {})}
    (run / "env.json").write_text(json.dumps(env))
    rows = []
    for case, power in (("target.sdpa", 2.0), ("reference.naive", 2.0), ("banded_window", 1.0)):
        for n in NS:
            params = {"n": n, "batch": 1, "heads": 4, "head_dim": 64, "dtype": "float32"}
            if case == "banded_window":
                params["window"] = 128
            st, reason = (status or {}).get((case, n), ("ok", None))
            if case == "reference.naive" and n == 4096:
                st, reason = "oom", "needs 4 GiB"
            if st != "ok":
                rows.append(_row(name, "scaling", case, params, {}, st, reason, impl=impl))
                continue
            t = 1e-3 * (n / 256) ** power * slow * (jitter or {}).get(n, 1.0)
            flops = 4.0 * n * (n if power == 2 else 128) * 64 * 4
            rows.append(_row(name, "scaling", case, params, {
                "time_s": t, "time_iqr_s": iqr * t, "time_min_s": 0.9 * t, "repeats": 7,
                "peak_mem_bytes": 4.0 * n ** power * 16, "flops": flops, "tflops": flops / t / 1e12},
                impl=impl))
    for depth in (1, 2, 4):
        params = {"depth": depth, "window": 16, "n": 256}
        formula = depth * 16
        rows.append(_row(name, "receptive_field", "banded_window", params,
                         {"receptive_field": formula + rf_off, "formula": formula}, impl=impl))
    for case, kv in (("mha", 8), ("gqa", 2), ("mqa", 1)):
        b = 2 * 2 * kv * 1024 * 64 * 4
        rows.append(_row(name, "kv_cache", case, {"n": 1024, "heads": 8, "kv_heads": kv, "layers": 2},
                         {"cache_bytes": b, "cache_formula_bytes": b}, impl=impl))
    for case, acc in (("lstm", 0.71), ("target.sliding_window", 0.84)):
        rows.append(_row(name, "finetune", case, {"task": "copy", "steps": 200},
                         {"accuracy": acc, "accuracy_ci95": [acc - 0.03, acc + 0.03],
                          "tokens_per_s": 5e4 / slow}, impl=impl))
    rows += list(extra_rows)
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "fits.json").write_text(json.dumps({
        "scaling|banded_window": {"exponent": 1.0, "ci95": [0.98, 1.02], "n_range": [256, 4096]}}))
    grad = [{"depth": d, "distance": k, "grad_norm": 2.0 ** -(k / (8 * d)) if k <= 16 * d else 0.0}
            for d in (1, 2, 4) for k in range(0, 80)]
    pd.DataFrame(grad).to_csv(run / "receptive_field_grad.csv", index=False)
    pd.DataFrame({"property": ["attention.scale", "attention.causal"], "reference": ["pass", "pass"],
                  "my_attn": ["pass", "fail"]}).to_csv(run / "conformance" / "conformance.csv", index=False)
    return run


def write_pytest_benchmark(path: Path, median=0.002) -> Path:
    data = {"machine_info": {"node": "hostB", "processor": "x86_64", "python_version": "3.11.2",
                             "cpu": {"brand_raw": "Synthetic CPU", "count": 2}},
            "commit_info": {"id": "abc123", "dirty": False},
            "benchmarks": [{"group": None, "name": f"test_sdpa[{n}]", "fullname": f"b.py::test_sdpa[{n}]",
                            "params": {"n": n}, "param": str(n), "extra_info": {},
                            "options": {"timer": "perf_counter"},
                            "stats": {"min": 0.9 * median * n / 256, "max": 1.2 * median * n / 256,
                                      "mean": median * n / 256, "stddev": 1e-5, "rounds": 20,
                                      "median": median * n / 256, "iqr": 0.02 * median * n / 256,
                                      "q1": median, "q3": median, "iterations": 1}}
                           for n in (256, 512, 1024)],
            "datetime": "2025-01-01T00:00:00", "version": "5.2.3"}
    path.write_text(json.dumps(data))
    return path


