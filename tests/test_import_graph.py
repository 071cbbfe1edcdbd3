"""The import graph of ``harness/`` (every module, its packages' modules too) is a DAG, and the
engine imports nothing from ``suites``.

Every import counts: at module level, under ``if TYPE_CHECKING``, and inside functions (an import
moved into a function to dodge a circle is still a circle), as well as a module name handed to
``importlib.import_module`` / ``__import__`` as a string literal.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "harness"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> set[str]:
    """Every module name ``path`` imports (absolute; a relative import resolved against it)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)  # ``from harness import guard``
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in ("import_module", "__import__"):
                names.add(node.args[0].value)
    return names


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in HARNESS.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        # ``import harness.a.b`` imports harness.a too; an edge to a package's own __init__ is not a circle
        targets = {m for m in imported(path) if m in modules and m != name}
        edges[name] = {m for m in targets if not name.startswith(m + ".")}
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``edges`` (as a path that returns to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_harness_import_graph_has_no_circle():
    found = cycle(graph())
    assert found is None, "import circle in harness/: " + " -> ".join(found)


def test_the_checker_sees_a_circle_through_an_import_inside_a_function():
    assert cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    tree_edges = imported(HARNESS / "boundary" / "loader.py")
    assert "harness.boundary.isolation" in tree_edges  # (load_target picks the worker backend)


def suite_modules_named(path: Path) -> set[str]:
    """Modules of ``suites`` that ``path`` imports, or names in a string (an import by name)."""
    named = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
             and isinstance(n.value, str) and re.fullmatch(r"suites(\.\w+)+", n.value)}
    return named | {m for m in imported(path) if m == "suites" or m.startswith("suites.")}


def test_the_engine_imports_no_suite():
    for path in HARNESS.rglob("*.py"):
        suites = sorted(suite_modules_named(path))
        assert not suites, f"{path.relative_to(ROOT)} imports {suites}: suite configs are discovered, not imported"


def test_the_engine_is_grouped_by_stage_and_the_flat_paths_still_import():
    """harness/ holds only the top floor (plug-in, CLI, runner, controls) beside its stage folders, each
    stage imports only the stages below it (verdicts no boundary module), and every module's path of
    before the grouping is an alias of the same module object (the facade: users' adapters, conftests
    and monkeypatches that name ``harness.tolerance`` or ``from harness import guard`` keep working)."""
    import importlib
    import harness
    top = sorted(p.stem for p in HARNESS.glob("*.py"))
    assert top == ["__init__", "__main__", "cli", "controls", "plugin", "runner"], top
    below = {"basics": set(), "spec": {"basics"}, "verdicts": {"basics"},
             "boundary": {"basics", "spec", "verdicts"}}
    edges = graph()
    stage_of = {n: n.split(".")[1] for n in edges if n.count(".") >= 1}
    for name, targets in edges.items():
        stage = stage_of.get(name)
        if stage in below:
            crossing = {stage_of[t] for t in targets if stage_of.get(t) in below} - {stage}
            assert crossing <= below[stage], f"{name} imports from {crossing - below[stage]}"
    for stage, modules in harness.STAGES.items():
        assert sorted(p.stem for p in (HARNESS / stage).glob("*.py") if p.stem != "__init__") == sorted(modules)
        for m in modules:
            assert importlib.import_module(f"harness.{m}") is importlib.import_module(f"harness.{stage}.{m}")
    from harness import guard, tolerance  # noqa: F401 (the old spelling)
    assert guard.__name__ == "harness.boundary.guard" and tolerance.__name__ == "harness.spec.tolerance"
