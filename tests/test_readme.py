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
