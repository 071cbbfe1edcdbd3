"""A missing optional dependency of the harness (an extra of its distribution: pyarrow, seaborn,
matplotlib, tqdm, pytest-benchmark, nvidia-ml-py, transformers, triton) gives a one-line install hint,
``pip install "transformer-conformance-harness[<extra>]"``, never a traceback (issue 41: a missing
pyarrow at the report stage was an "internal error" with a traceback). Each case hides the module
(``sys.modules[name] = None``: its import raises) in this process."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.basics import extras
from harness.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "reports" / "baselines" / "cpu-reference"


def hide(monkeypatch, *modules: str) -> None:
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def test_each_module_is_in_the_extra_its_hint_names():
    """The table agrees with pyproject.toml: the extra named in a hint installs the package."""
    tomllib = pytest.importorskip("tomllib")  # (Python 3.11+)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, e in extras.EXTRAS.items():
        packages = {p.split("=")[0].split(">")[0].split("<")[0].strip() for p in declared[e.extra]}
        assert e.package in packages, (module, e.extra, packages)
        assert extras.install_line(module) == f'pip install "transformer-conformance-harness[{e.extra}]"'


def test_missing_module_reads_the_exception_chain(monkeypatch):
    hide(monkeypatch, "pyarrow")
    import pandas as pd
    with pytest.raises(ImportError) as info:  # pandas re-raises it as its own ImportError
        pd.DataFrame({"a": [1]}).to_parquet(Path("/nonexistent") / "x.parquet", engine="pyarrow")
    assert extras.missing_module(info.value) == "pyarrow"
    assert extras.missing_module(ModuleNotFoundError("No module named 'seaborn.x'", name="seaborn.x")) == "seaborn"
    # "cannot import name X from M": M is installed (a too-old version), not the extra's absence
    assert extras.missing_module(ImportError("cannot import name 'X' from 'transformers'", name="transformers")) is None
    assert extras.missing_module(ModuleNotFoundError("No module named 'numpyx'", name="numpyx")) is None


@pytest.mark.parametrize("module, argv, alternative", [
    ("pyarrow", ["--no-plots"], "--formats csv,md"),
    ("seaborn", ["--formats", "csv"], "--no-plots"),
    ("matplotlib", ["--formats", "csv", "--html"], "--no-plots"),
])
def test_report_names_the_extra_instead_of_a_traceback(monkeypatch, tmp_path, capsys, module, argv, alternative):
    hide(monkeypatch, module)
    assert cli(["report", str(BASELINE), "--out", str(tmp_path / "r"), *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and 'pip install "transformer-conformance-harness[report]"' in err, err
    assert alternative in err, err
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_report_without_the_extras_it_leaves_out_still_runs(tmp_path):
    """In a fresh process (pandas imported without pyarrow, as on a machine that lacks it)."""
    import subprocess
    code = ("import sys\nfor m in ('pyarrow', 'seaborn', 'matplotlib'): sys.modules[m] = None\n"
            "from harness.cli import main\nsys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "report", str(BASELINE), "--out", str(tmp_path / "r"),
                           "--formats", "csv,md", "--no-plots", "--html"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "r" / "report.html").is_file()


def test_an_unforeseen_missing_extra_is_one_line_too(monkeypatch, tmp_path, capsys):
    """Wherever the import fails (here: inside the report's writing; or any command), the message
    is the install line, not "internal error" and a traceback."""
    from harness.reports import tables

    def write_tables(*a, **k):
        try:
            import seaborn  # noqa: F401
        except ImportError as exc:
            raise ImportError("plotting failed") from exc
    hide(monkeypatch, "seaborn")
    monkeypatch.setattr(tables, "write_tables", write_tables)
    monkeypatch.setattr("harness.commands.report.missing_extra", lambda formats, plots: None)
    assert cli(["report", str(BASELINE), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "[report]" in err, err

    import harness.commands.sweep as sweep

    def needs_tqdm(args):
        import tqdm  # noqa: F401
    hide(monkeypatch, "tqdm")
    monkeypatch.setattr(sweep, "main", needs_tqdm)
    assert cli(["sweep"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness sweep: ") and err.count("\n") == 1 and "[bench]" in err, err


def test_bench_point_without_an_extra_is_skipped_with_its_hint(tmp_path, monkeypatch, capsys):
    from harness.bench.points import Point, PointRunner
    from harness.bench.store import ResultStore

    def needs_transformers():
        from transformers import DynamicCache  # noqa: F401
    hide(monkeypatch, "transformers", "tqdm")
    runner = PointRunner(ResultStore(tmp_path), "x", "cpu", progress=True, verbose=True)
    (row,) = runner.run([Point("finetune", "reference", {"n": 1}, needs_transformers)])
    assert row["status"] == "skipped", row
    assert row["reason"].endswith('pip install "transformer-conformance-harness[hf]"'), row["reason"]
    err = capsys.readouterr().err
    assert "no progress bar: " in err and "[bench]" in err, err  # tqdm: a plain line per point instead

    from harness.adapters.hf_attention_interface import hf_available
    assert hf_available() == extras.missing_line("transformers")


def test_a_property_that_needs_a_missing_extra_is_skipped_with_its_hint(pytester, monkeypatch):
    """The BERT family's reference builds transformers' BertModel: without transformers, the
    property is skipped with the install line (not an implementation error of the target)."""
    from planted_support import run_suite
    hide(monkeypatch, "transformers")
    result = run_suite(pytester, ["test_models.py"], ["reference"], "test_dependency", "--isolation", "none", "-rs")
    result.assert_outcomes(skipped=1)
    assert 'need transformers, which is not installed: pip install "transformer-conformance-harness[hf]"' \
        in result.stdout.str()


def test_an_adapter_without_transformers_says_what_to_install(monkeypatch):
    from harness.boundary.loader import load_target
    hide(monkeypatch, "transformers")
    monkeypatch.delitem(sys.modules, "harness.adapters.hf_mlm", raising=False)
    target = load_target("harness.adapters.hf_mlm", isolation="none")
    try:
        assert target.load_error and target.load_error.endswith(extras.missing_line("transformers")), \
            target.load_error
        assert "traceback" not in target.load_error
    finally:
        target.close()
    monkeypatch.delitem(sys.modules, "harness.adapters.hf_mlm", raising=False)


def test_the_benchmark_suites_without_pytest_benchmark_skip_with_its_hint(pytester, monkeypatch):
    monkeypatch.setenv("HARNESS_BENCHMARKS", "1")
    suite = ROOT / "suites" / "benchmarks" / "test_bench_attention.py"
    result = pytester.runpytest_inprocess(str(suite), "--impl", "reference", "-p", "no:benchmark",
                                          "-p", "no:cacheprovider", "-k", "lstm and 256", "-rs")
    result.assert_outcomes(skipped=1)
    assert 'pip install "transformer-conformance-harness[bench]"' in result.stdout.str()
