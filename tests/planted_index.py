"""Planted bugs that describe themselves (issue 45): each file under ``tests/planted/<family>/`` that
plants a bug says, in its module docstring, what must catch it::

    Caught by: rmsnorm.scale_invariance (RMSNorm(a x) = RMSNorm(x) / a instead of RMSNorm(x)).
    Message: RMSNorm(
    Message: vs RMSNorm(x)

``Caught by:`` names the property (``prefix.name``: the conformance table's row); each ``Message:``
line is a phrase the failure must contain besides the property's name (the rest of the line, as
written), each ``Absent:`` line one it must not contain (a note that belongs to another cause). The suite file and test that run the property are found from the property's name
(``PROPERTY_PREFIX`` and the ``test_`` functions of ``suites/``), so a new planted bug is one file:
``tests/test_planted_bugs.py`` collects it.
"""
from __future__ import annotations

import ast
import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted"
SUITES = ROOT / "suites"

_CAUGHT = re.compile(r"Caught by:\s*([a-z0-9_]+\.[a-z0-9_]+)")
_MESSAGE = re.compile(r"^\s*Message:\s?(.*?)\s*$", re.M)
_ABSENT = re.compile(r"^\s*Absent:\s?(.*?)\s*$", re.M)


@dataclass(frozen=True)
class Planted:
    """One planted bug, as its file describes it."""
    path: Path
    property: str
    messages: tuple[str, ...]
    absent: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        return self.path.parent.name

    @property
    def id(self) -> str:
        return f"{self.family}/{self.path.stem}"

    @property
    def suite(self) -> Path:
        return properties()[self.property][0]

    @property
    def test(self) -> str:
        return properties()[self.property][1]


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""


def describe(path: Path) -> Planted | None:
    """The planted bug ``path`` describes, or None for a file that plants none (a base, a control,
    a declared convention, a hostile or isolation target that other tests use)."""
    doc = docstring(path)
    found = _CAUGHT.search(doc)
    if not doc.startswith("Planted bug") or found is None:
        return None
    return Planted(path, found.group(1), tuple(_MESSAGE.findall(doc)), tuple(_ABSENT.findall(doc)))


@functools.lru_cache(maxsize=None)
def properties() -> dict[str, tuple[Path, str]]:
    """property -> (suite file, its test function), over every suite file."""
    found: dict[str, tuple[Path, str]] = {}
    for suite in sorted(SUITES.rglob("test_*.py")):
        source = suite.read_text()
        prefix = re.search(r'^PROPERTY_PREFIX = "([^"]+)"', source, re.M)
        if prefix is None:
            continue
        tests = re.findall(r"^def (test_\w+)\(", source, re.M)
        if re.search(r"^install\(globals\(\)\)", source, re.M):  # a module built by an engine (histories.install)
            module = importlib.import_module("harness." + ".".join(suite.relative_to(ROOT).with_suffix("").parts))
            tests = [n for n in vars(module) if n.startswith("test_")]
        for test in tests:
            name = f"{prefix.group(1)}.{test.removeprefix('test_')}"
            assert name not in found, f"{name} is defined by {found[name][0]} and {suite}"
            found[name] = (suite, test)
    return found


def planted(*families: str) -> list[Planted]:
    """Every planted bug of ``families`` (all when none), in a stable order."""
    folders = [PLANTED / f for f in families] if families else sorted(p for p in PLANTED.iterdir() if p.is_dir())
    bugs = [describe(p) for folder in folders for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]
    return [b for b in bugs if b is not None]
