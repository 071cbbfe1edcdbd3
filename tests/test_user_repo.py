"""The harness in a user's own repository (issue 41): the names it owns, the known-failures file
(``--xfails``), baselines by name or path, the docs that travel with the package.

The whole path (the wheel, a fresh environment, a folder with its own ``suites/``, ``reports/`` and
``reference.py``, the example workflow's steps) is ``.ci/user_repo.sh``, run by ``.ci/run``."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.basics import layout
from harness.verdicts import xfails
from harness.cli import main as cli
from planted_support import ROOT, run_suite

BUG = ROOT / "tests" / "planted" / "norms" / "rms_no_sqrt.py"
CORRECT = ROOT / "tests" / "planted" / "norms" / "_base.py"
PROPERTY = "rmsnorm.scale_invariance"


def test_parse_reads_properties_targets_and_notes():
    entries = xfails.parse("# a comment\n\nrope.relative  # float32 angles\nattention.*  my_attn.py\n", "xf.txt")
    assert [(e.property, e.target, e.note, e.where) for e in entries] == [
        ("rope.relative", "*", "float32 angles", "xf.txt:3"), ("attention.*", "my_attn.py", "", "xf.txt:4")]
    assert xfails.find(entries, "rope.relative", "anything") is entries[0]
    assert xfails.find(entries, "attention.causal", "my_attn.py", "my_attn") is entries[1]
    assert xfails.find(entries, "attention.causal", "other.py") is None
    assert xfails.find(entries, "rope.agreement", "x") is None


@pytest.mark.parametrize("line, message", [("rope.relative a b", r"expected 'PROPERTY \[TARGET\]"),
                                           ("relative", "is not a property name")])
def test_parse_refuses_a_malformed_line(line, message):
    with pytest.raises(xfails.XfailsError, match=message):
        xfails.parse(line, "xf.txt")


def _norm_run(pytester, tmp_path, impl, xfail_text=None, *extra):
    args = ["--conformance-report", str(tmp_path / "report")]
    if xfail_text is not None:
        path = tmp_path / "xfails.txt"
        path.write_text(xfail_text)
        args += ["--xfails", str(path)]
    return run_suite(pytester, ["test_rmsnorm.py"], [impl], "scale_invariance", *args, *extra)


def _kinds(tmp_path) -> dict:
    data = json.loads((tmp_path / "report" / "conformance.json").read_text())
    return {r["property"]: (r["kind"], r["result"]) for r in data["results"]}


def test_a_listed_failure_is_known_and_the_run_passes(pytester, tmp_path):
    result = _norm_run(pytester, tmp_path, BUG, f"{PROPERTY}  {BUG.name}  # our issue 1\n")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.assert_outcomes(xfailed=1)
    kind, text = _kinds(tmp_path)[PROPERTY]
    assert kind == "known" and text == "known fail (xfails.txt:1)"
    assert "1 known failure(s) seen" in result.stdout.str()


def test_a_failure_not_listed_still_fails(pytester, tmp_path):
    """The contrast: the same bug, with a file that lists another target or another property."""
    result = _norm_run(pytester, tmp_path, BUG, f"{PROPERTY}  someone_else.py\nrmsnorm.agreement\n")
    assert result.ret == 1
    result.assert_outcomes(failed=1)
    assert _kinds(tmp_path)[PROPERTY][0] == "fail"


def test_a_listed_pass_is_named_not_failed(pytester, tmp_path):
    result = _norm_run(pytester, tmp_path, CORRECT, f"{PROPERTY}\nrmsnorm.no_such_property\n")
    assert result.ret == 0
    out = result.stdout.str()
    assert f"listed but passes: {PROPERTY}" in out and "remove the line" in out
    assert "xfails.txt:2: rmsnorm.no_such_property * matches no property of this run" in out
    assert "remove the line" in _kinds(tmp_path)[PROPERTY][1]


def test_an_unreadable_xfails_file_is_a_usage_error(pytester, tmp_path):
    result = run_suite(pytester, ["test_rmsnorm.py"], [CORRECT], "scale_invariance",
                       "--xfails", str(tmp_path / "missing.txt"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--xfails: cannot read" in result.stderr.str()


def test_builtin_targets_are_the_harness_s_own():
    assert layout.builtin_module("reference") == "harness.reference"
    assert layout.builtin_module("reference.triton.norms") == "harness.reference.triton.norms"
    assert layout.builtin_module("./reference.py") is None and layout.builtin_module("mypkg.reference") is None
    assert layout.suite_module(layout.SUITES / "norms" / "test_rmsnorm.py") == "harness.suites.norms.test_rmsnorm"
    assert layout.suite_module(ROOT / "tests" / "test_user_repo.py") is None


def test_a_user_s_own_names_are_theirs(tmp_path):
    """In a folder with its own ``suites``, ``reports`` and ``reference``, the harness's commands use
    their own (``python -m`` puts the folder first on sys.path, where the clash was)."""
    for pkg in ("suites", "reports"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("OWNER = 'user'\n")
    (tmp_path / "reference.py").write_text("OWNER = 'user'\n")
    probe = ("import harness.commands.report, harness.commands.repro, harness.suites.kit, harness.reference;"
             "import suites, reports, reference;"
             "assert suites.OWNER == reports.OWNER == reference.OWNER == 'user';"
             "from harness.reports import gate; from harness.commands.repro import load_check;"
             "print(load_check('harness.suites.norms.test_rmsnorm::check_scale_invariance').__name__)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "check_scale_invariance"


def test_repro_lines_name_the_suites_by_module(tmp_path, capsys):
    """A repro line is the same in a checkout and a wheel, and an older line's path still replays."""
    config = ('{"type":"NormConfig","lead":[2],"normalized_shape":[8],"dtype":"float32","eps":1e-05,'
              '"affine":true,"log2_scale":0,"seed":0}')
    for ref in ("harness.suites.norms.test_rmsnorm::check_scale_invariance",
                "suites/norms/test_rmsnorm.py::check_scale_invariance"):
        code = cli(["repro", ref, "--impl", str(BUG), "--isolation", "none", "--config", config])
        out = capsys.readouterr().out
        assert code == 1 and "FAILED" in out, out
        assert "python -m harness repro harness.suites.norms.test_rmsnorm::check_scale_invariance" in out


def test_baselines_by_name_or_path(tmp_path, monkeypatch):
    """In a user's repository: the checkout's ``reports/baselines/NAME`` is read as the stored NAME."""
    from harness.commands.report import resolve_baseline
    monkeypatch.chdir(tmp_path)
    from harness.reports.load import InputError
    assert resolve_baseline("cpu-reference") == layout.BASELINES / "cpu-reference"
    assert resolve_baseline("reports/baselines/cpu-reference") == layout.BASELINES / "cpu-reference"
    mine = tmp_path / "ci" / "baselines" / "cpu"
    mine.mkdir(parents=True)
    assert resolve_baseline(str(mine)) == mine
    with pytest.raises(InputError, match=r"no stored baseline of that name \(stored: cpu-reference"):
        resolve_baseline("ci/baselines/nowhere")


def test_docs_travel_with_the_package(capsys):
    assert cli(["docs"]) == 0
    listing = capsys.readouterr().out
    assert "ci " in listing and "protocol " in listing
    assert cli(["docs", "ci"]) == 0
    assert capsys.readouterr().out.startswith("# Use it from your project's CI")
    assert cli(["docs", "nope"]) == 2


def test_migrate_is_a_command(tmp_path, capsys):
    from run_folders import make_run
    run = make_run(tmp_path, "old")
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    (run / "results.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "role"}) + "\n"
                                               for r in rows))
    assert cli(["migrate", str(run)]) == 0
    assert "rows migrated" in capsys.readouterr().out
    assert all("role" in json.loads(line) for line in (run / "results.jsonl").read_text().splitlines())


def test_the_readme_ci_section_is_the_workflow_ci_runs():
    """The README's CI commands are the example workflow's `run:` lines (with its parameters
    filled in), which .ci/user_repo.sh runs; .ci/run runs that script."""
    import re
    import yaml
    flow = yaml.safe_load((ROOT / "docs" / "examples" / "conformance.yml").read_text())
    env = flow["env"]
    lines = [line.strip() for step in flow["jobs"]["conformance"]["steps"] if "run" in step
             for line in step["run"].splitlines() if line.strip()]
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use it from your project's CI", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    want = []
    for line in lines:
        for key, value in env.items():
            line = line.replace(f'"${key}"', f'"{value}"' if " " in value or "@" in value else value)
            line = line.replace(f"${key}", value)
        want.append(line)
    assert [ln.strip() for ln in block.strip().splitlines()] == want
    assert "user_repo.sh" in (ROOT / ".ci" / "run").read_text()
    assert shutil.which("bash")
