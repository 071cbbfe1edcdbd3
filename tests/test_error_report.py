"""How close to the edge a target runs (issue 48 item 5): every comparison under the tolerance policy is
measured in ULPs of the output scale; a failure's message says its error and what it was allowed in
those units, and the conformance report (JSON ``error``, ``errors.csv``, the HTML report) carries per
(property, target, dtype) the comparison closest to the edge, for passes too."""
from __future__ import annotations

import json

import pandas as pd
import torch

from harness.spec import tolerance
from harness.verdicts import conformance_table as conformance
from planted_support import ROOT, run_suite


def _compare(err: float, dtype=torch.float32, scale: float = 1.0):
    ref = torch.full((4,), scale, dtype=torch.float64)
    return tolerance.compare((ref + err).to(dtype), ref, ref.to(dtype), dtype=dtype)


def test_a_failure_says_its_error_and_its_allowance_in_ulps_of_the_output_scale():
    # float32: ulp 2^-23 at 1; the output's scale 8 -> one ULP of the output scale is 8 * 2^-23
    cmp = _compare(1e-3, scale=8.0)
    assert not cmp.ok
    ulps = 1e-3 / (8 * 2.0 ** -23)
    assert abs(cmp.ulps(cmp.max_error) - ulps) / ulps < 1e-3
    assert f"{cmp.ulps(cmp.max_error):.3g} vs {cmp.ulps(cmp.allowed):.3g} ULPs of the output scale (float32)" \
        in cmp.describe()
    assert cmp.ulps(cmp.allowed) < cmp.ulps(cmp.max_error)  # (failed: over its allowance)


def test_the_summary_keeps_per_dtype_the_comparison_closest_to_the_edge():
    tolerance.observe()
    small, edge, half = _compare(1e-7), _compare(1.5e-6), _compare(1e-3, dtype=torch.float16)
    rejected = _compare(1.0)  # a passing property's failed comparison: an alternative it rejected
    kept = tolerance.observed()
    assert kept == [small, edge, half, rejected] and tolerance.observed() == []  # (observing stopped)
    passed = tolerance.error_summary(kept, failed=False)
    assert set(passed) == {"float32", "float16"}
    assert passed["float32"]["margin"] == round(edge.margin, 4) and passed["float32"]["comparisons"] == 2
    assert passed["float32"]["margin"] <= 1 and passed["float16"]["comparisons"] == 1
    failed = tolerance.error_summary(kept, failed=True)  # a failure: its worst comparison, over 1
    assert failed["float32"]["margin"] == round(rejected.margin, 4) > 1
    assert failed["float32"]["error_ulps"] > failed["float32"]["allowed_ulps"]


def test_nothing_is_kept_while_nobody_observes():
    tolerance.observed()
    _compare(1e-3)
    assert tolerance.observed() == []


def test_the_conformance_report_carries_the_error_of_passes_and_failures(pytester, tmp_path):
    """A suite run: each pass of the reference says per dtype how close it ran (margin <= 1), a planted
    bug's failures say by how much they missed (margin > 1), in the JSON and in errors.csv."""
    report = tmp_path / "report"
    bug = ROOT / "tests" / "planted" / "norms" / "rms_eps_outside_sqrt.py"
    result = run_suite(pytester, ["test_rmsnorm.py"], ["reference", str(bug)], "weight or no_mean",
                       "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) >= 1
    results = json.loads((report / "conformance.json").read_text())["results"]
    ran = {(r["property"], r["target"]): r for r in results if r["error"]}
    passes = [r for (p, t), r in ran.items() if t == "reference"]
    failures = [r for (p, t), r in ran.items() if t == str(bug) and r["kind"] == "fail"]
    assert passes and failures
    for r in passes:
        assert "float32" in r["error"] and all(e["margin"] <= 1 for e in r["error"].values()), r
    for r in failures:
        assert max(e["margin"] for e in r["error"].values()) > 1, r
    errors = pd.read_csv(report / "errors.csv")
    assert list(errors.columns) == conformance.ERROR_COLUMNS
    assert list(errors["margin"]) == sorted(errors["margin"], reverse=True)  # closest to the edge first
    assert len(errors) == sum(len(r["error"]) for r in ran.values())


def test_the_html_report_shows_the_errors_table(tmp_path):
    from reports.html import render
    from reports.load import Run
    errors = pd.DataFrame([{"property": "rmsnorm.weight", "target": "mine", "dtype": "float16", "error_ulps": 1.5,
                            "allowed_ulps": 3.5, "margin": 0.43, "comparisons": 12}])
    run = Run(path=tmp_path, run_id="run", conformance=pd.DataFrame({"mine": ["pass"]}, index=["rmsnorm.weight"]),
              errors=errors)
    df = pd.DataFrame(columns=["run_id", "key", "suite", "status"])
    page = render(runs=[run], df=df, tables={})
    section = page.split("id='conformance-run'")[1]
    assert "error against float64" in section and "ULPs of the output scale" in section
    assert "rmsnorm.weight" in section and "0.43" in section
