"""Suites share machinery through public names only: no file under ``suites/`` imports another
module's private (``_``-prefixed) name, imports a private module, or reads a private attribute of
a module it imported. What two suites share is public (``suites/kit.py``, ``suites/strategies.py``,
a family's ``helpers.py`` / ``configs.py``, ``suites/gradients.py``, ...)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "suites"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> list[str]:
    """Each private name ``source`` takes from another module: ``from m import _x``,
    ``from m._p import x``, ``import m._p``, and ``mod._x`` where ``mod`` is a name it imported."""
    tree = ast.parse(source)
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            parts = (node.module or "").split(".")
            found += [f"line {node.lineno}: from {node.module} (a private module)"
                      for p in parts if private(p)][:1]
            for a in node.names:
                if private(a.name):
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
                modules.add(a.asname or a.name)  # (a module or not: an attribute read of it counts alike)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if any(private(p) for p in a.name.split(".")):
                    found.append(f"line {node.lineno}: import {a.name} (a private module)")
                modules.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in modules:
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_suite_file_takes_a_private_name_from_another_module():
    offenders = {str(p.relative_to(ROOT)): uses for p in sorted(SUITES.rglob("*.py"))
                 if (uses := private_uses(p.read_text()))}
    assert not offenders, f"suite files using other modules' private names (make them public): {offenders}"


def test_the_scan_sees_each_kind_of_private_use():
    source = ("from __future__ import annotations\nfrom harness.spec.configs import _SEED, Config\n"
              "from suites import _grad\nimport suites._magnitudes\nfrom suites.norms import helpers as h\n"
              "x = h._private(1)\ny = h.public(2)\nz = self._own\n")
    uses = private_uses(source)
    assert uses == ["line 2: from harness.spec.configs import _SEED", "line 3: from suites import _grad",
                    "line 4: import suites._magnitudes (a private module)", "line 6: h._private"], uses


def test_the_kit_exports_what_it_names():
    from harness.suites import kit
    assert {"impl", "run", "on_target", "SEED", "DTYPE", "expect_tensor"} <= set(kit.__all__)
    assert all(hasattr(kit, n) for n in kit.__all__)
