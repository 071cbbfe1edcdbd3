"""Every protocol name has every part its record (``harness/spec/protocol.py``) promises (issue 23).

A name is one record: family, signature, reference, ``writes``/``new_memory``, features and how the
consistency section compares it. This test fails when a name lacks any other part:
- its reference: the record's ``reference`` module defines it, ``reference/__init__.py`` exports it
  (``__all__``) and it has the record's kind and signature;
- a property: a test in ``suites/<family>/`` carries ``@pytest.mark.needs(name)``;
- a planted bug: a file in ``tests/planted/`` (not the harness's own hostile/isolation/consistency
  targets) binds the name at its top level, and a self-test in ``tests/`` names that file;
- its features: each is required somewhere in ``suites/<family>/`` (``"feature"`` in its source)
  and named (in backticks) in README.md or docs/*.md;
- its row: the record's signature, character for character, in README.md or a docs/*.md page
  (both are read, so the protocol reference may live in either);
- the suites that run across names: the ``CASES`` of the families' ``suites/<family>/specs.py`` hold
  exactly the compared names, each in its family's module, and every function has a ``History``
  there (``history.<name>``) or a reason in its family's ``NO_HISTORY``.
It also fails when any backticked call of a protocol name in those pages (``alibi_bias(num_heads,
query_len, key_len)``) names a parameter the record does not have, or names them out of the record's
order (a call may leave some off: ``build_bert(add_pooling_layer=False)``). The checks are functions, so their own self-tests below feed them a made-up record and a
drifted page.
"""
from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

from harness import reference
from harness.spec import declarations, protocol
from harness.boundary import guard
from harness.spec.protocol import Name, params_of

import planted_index

ROOT = Path(__file__).resolve().parents[1]
#: planted targets that test the harness itself (hostile code, worker isolation, consistency
#: backends), not one protocol name's properties
HARNESS_PLANTED = {"hostile", "isolation", "consistency"}


def doc_pages() -> dict[str, str]:
    """README.md and every docs/*.md, as rendered (a table cell's ``\\|`` is ``|``)."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text().replace("\\|", "|") for p in paths if p.is_file()}


@functools.cache
def needs_marks() -> dict[str, frozenset[str]]:
    """family -> the names that tests in ``suites/<family>/test_*.py`` mark ``needs``."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / "suites").glob("*/test_*.py")):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        marks = getattr(module, "pytestmark", [])
        marks = list(marks) if isinstance(marks, (list, tuple)) else [marks]
        for name, obj in vars(module).items():
            if name.startswith("test_"):
                marks += getattr(obj, "pytestmark", [])
        out.setdefault(path.parent.name, set()).update(a for m in marks if m.name == "needs" for a in m.args)
    return {k: frozenset(v) for k, v in out.items()}


def top_level_names(path: Path) -> set[str]:
    """What a file binds at its top level: def, class, assignment, import."""
    bound = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {a.asname or a.name for a in node.names}
    return bound


@functools.cache
def planted_bugs() -> dict[str, tuple[str, ...]]:
    """name -> the planted bugs that define it and that a self-test runs: described by their docstring
    (``tests/planted_index.py``: tests/test_planted_bugs.py runs each) or named by a tests/test_*.py."""
    self_tests = "".join(p.read_text() for p in sorted((ROOT / "tests").glob("*.py")))
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests" / "planted").rglob("*.py")):
        rel = path.relative_to(ROOT / "tests" / "planted")
        if path.name.startswith("_") or rel.parts[0] in HARNESS_PLANTED or (
                path.stem not in self_tests and planted_index.describe(path) is None):
            continue
        for name in top_level_names(path) & set(protocol.NAMES):
            out.setdefault(name, []).append(str(rel))
    return {k: tuple(v) for k, v in out.items()}


def family_source(family: str) -> str:
    return "".join(p.read_text() for p in sorted((ROOT / "suites" / family).glob("*.py")))


def missing_parts(rec: Name, pages: dict[str, str]) -> list[str]:
    """What ``rec``'s name lacks, one line per part; empty when it has every one."""
    parts = []
    try:
        obj = getattr(importlib.import_module(rec.reference), rec.name)
    except (ImportError, AttributeError) as exc:
        parts.append(f"reference: {rec.reference} does not define it ({type(exc).__name__}: {exc})")
    else:
        if rec.name not in reference.__all__ or getattr(reference, rec.name) is not obj:
            parts.append(f"reference: reference/__init__.py does not export {rec.reference}.{rec.name} in __all__")
        kind = "class" if isinstance(obj, type) else "function" if callable(obj) else "constant"
        problem = protocol.signature_problem(rec.name, obj)
        if kind != rec.kind or problem:
            parts.append(f"reference: {rec.reference}.{rec.name} is a {kind}; {problem or 'the record says ' + rec.kind}")
    folder = ROOT / "suites" / rec.family
    if not folder.is_dir():
        parts.append(f"family: no suite folder suites/{rec.family}/")
    else:
        if rec.name not in needs_marks().get(rec.family, ()):
            parts.append(f"property: no test in suites/{rec.family}/test_*.py carries "
                         f"@pytest.mark.needs({rec.name!r})")
        unused = [f for f in rec.features if f'"{f}"' not in family_source(rec.family)]
        if unused:
            parts.append(f"features: {unused} are never required in suites/{rec.family}/ "
                         f"(require_features / @pytest.mark.uses)")
    if not planted_bugs().get(rec.name):
        parts.append("planted bug: no file in tests/planted/ defines it (at its top level) and is named "
                     "by a self-test in tests/")
    if not any(f"`{rec.signature}`" in text for text in pages.values()):
        parts.append(f"docs row: `{rec.signature}` is in none of {', '.join(pages)}")
    undocumented = [f for f in rec.features if not any(f"`{f}`" in text for text in pages.values())]
    if undocumented:
        parts.append(f"features: {undocumented} are in none of {', '.join(pages)} (the HARNESS_UNSUPPORTED list)")
    return parts


def documented_calls(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(span, parameter names) of each backticked call or signature of a protocol name in ``text``."""
    names = "|".join(sorted(map(re.escape, protocol.NAMES), key=len, reverse=True))
    out = []
    for span in re.findall(rf"`((?:{names})\s*\([^`]*)`", text):
        params = params_of(span)
        if params is not None:  # (a call with values, not names, documents no parameters)
            out.append((span, params))
    return out


def in_order(params: tuple[str, ...], of: tuple[str, ...]) -> bool:
    """``params`` are some of ``of``, in ``of``'s order."""
    rest = iter(of)
    return all(p in rest for p in params)


def drifted(text: str) -> list[str]:
    """The documented calls that name a parameter the record lacks, or name them out of order."""
    bad = []
    for span, params in documented_calls(text):
        rec = protocol.NAMES[re.match(r"\w+", span).group(0)]
        if not in_order(params, rec.params):
            bad.append(f"`{span}` names ({', '.join(params)}); the record's parameters are "
                       f"({', '.join(rec.params)})")
    return bad


# ---- every name, every part --------------------------------------------------------------------

@pytest.mark.parametrize("name", list(protocol.NAMES))
def test_name_has_every_part(name):
    missing = missing_parts(protocol.NAMES[name], doc_pages())
    assert not missing, f"protocol name {name} lacks:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("page", list(doc_pages()))
def test_documented_signatures_are_the_records(page):
    bad = drifted(doc_pages()[page])
    assert not bad, f"{page} documents signatures that differ from harness/spec/protocol.py:\n  " + "\n  ".join(bad)


def test_reference_exports_exactly_the_records():
    assert sorted(reference.__all__) == sorted(protocol.NAMES)


def test_consistency_cases_are_the_compared_records():
    """Each family's ``specs.CASES`` hold exactly its compared names (a Case declared in another
    family's specs is an error of ``declared_cases``); the rest are skipped with the record's reason."""
    from harness.suites.consistency.differential import declared_cases
    cases = declared_cases()
    assert set(cases) == set(protocol.COMPARED)
    with pytest.raises(ValueError, match="not its family's"):
        _misplaced_case()


def _misplaced_case():
    """declared_cases on a family whose specs hold another family's Case (a made-up module)."""
    import sys
    import types
    from harness.suites.consistency.differential import declared_cases
    fake = types.ModuleType("harness.suites.made_up_family.specs")
    fake.CASES = {"LayerNorm": None}
    sys.modules[fake.__name__] = fake
    try:
        return declared_cases(["made_up_family"])
    finally:
        del sys.modules[fake.__name__]


def test_every_function_has_a_history():
    """Each protocol function has a ``History`` in its family's ``specs.HISTORIES`` (so
    ``history.<name>`` exists), or its family's ``NO_HISTORY`` says why not (the factories);
    classes have the stateful suites' call sequences, constants are not called."""
    from harness.suites.histories import declared
    histories = declared()
    exempt = {}
    for family in protocol.FAMILIES:
        exempt.update(getattr(importlib.import_module(f"harness.suites.{family}.specs"), "NO_HISTORY", {}))
    functions = {r.name for r in protocol.RECORDS if r.kind == "function"}
    assert set(histories) | set(exempt) == functions and not set(histories) & set(exempt)
    from harness.suites import test_history
    assert all(f"test_{n}" in vars(test_history) and f"check_{n}" in vars(test_history) for n in histories)


def test_the_tables_are_derived_from_the_records():
    """guard, declarations and the consistency section read the records' tables; a per-name fact
    written into one of them by hand (the style before the records) fails here."""
    assert guard.MUTABLE is protocol.MUTABLE and guard.NO_ALIAS is protocol.NO_ALIAS
    common = set(declarations.FEATURES) - set(protocol.FEATURES)
    assert common == {"autocast", "backward", *declarations.DTYPE_NAMES}, \
        f"{common}: a feature of one protocol name belongs in its record (harness/spec/protocol.py, features=)"
    assert all(declarations.FEATURES[f] == what for f, what in protocol.FEATURES.items())


def test_the_derived_values_are_the_hand_written_ones():
    """The values guard and declarations held when they were written out by hand (issue 23 moved
    them into the records without changing one)."""
    assert guard.MUTABLE["attention_with_kvcache"] == frozenset({1, 2, "k_cache", "v_cache"})
    assert {"scaled_dot_product_attention", "sliding_window_attention", "attention_with_kvcache"} <= guard.NO_ALIAS
    assert {"attn_mask", "dropout", "is_causal", "enable_gqa", "scale", "kvcache_window",
            "kvcache_rotary"} <= set(protocol.FEATURES)


# ---- the checks catch what they are for ---------------------------------------------------------

def test_a_name_with_no_parts_is_reported_part_by_part():
    made_up = Name("made_up_name", family="nowhere", reference="harness.reference.attention",
                   signature="made_up_name(x, y=1)", features={"attn_mask": "?"}, compared="equal")
    missing = missing_parts(made_up, {"README.md": "`made_up_name(x)`, `attn_mask`"})
    assert [m.split(":")[0] for m in missing] == ["reference", "family", "planted bug", "docs row"], missing
    assert missing_parts(made_up, {"README.md": ""})[-1].startswith("features: ['attn_mask'] are in none of")


def test_an_unused_feature_and_an_unmarked_property_are_reported():
    sdpa = protocol.NAMES["scaled_dot_product_attention"]
    moved = Name(sdpa.name, family="norms", reference=sdpa.reference, signature=sdpa.signature,
                 features={"dropout": "dropout_p > 0"}, compared="equal")
    missing = missing_parts(moved, doc_pages())
    assert [m.split(":")[0] for m in missing] == ["property", "features"], missing


def test_a_drifted_signature_is_reported():
    page = ("| `alibi_bias(num_heads, query_len, key_len) -> Tensor[H, Lq, Lk]` | ok |\n"
            "| `alibi_bias(heads, query_len, key_len)` | renamed |\n"
            "`apply_rotary_embedding(x, positions)` leaves base off; `alibi_bias(8, 4, 4)` is a call\n"
            "`RotaryEmbedding(D, base)`, `build_bert(add_pooling_layer=False)`, `alibi_bias(query_len, num_heads)`")
    bad = drifted(page)
    assert len(bad) == 3 and "`alibi_bias(heads, query_len, key_len)`" in bad[0], bad
    assert "(D, base)" in bad[1] and "(query_len, num_heads)" in bad[2], bad


@pytest.mark.parametrize("signature,params", [
    ("f(a, b=1, *, c=None, **kw) -> (x, y)", ("a", "b", "c", "kw")),
    ("Cls(dim, base=10000.0); forward(x (B, H, L, D), offset=0)", ("dim", "base")),
    ("g(size='a, b', n=(1, 2)) -> T", ("size", "n")),
    ("h(positions: LongTensor)", ("positions",)),
    ("CONST = 'a' | 'b'", ()),
    ("f(8, 4)", None),
    ("f(a, b", None),
])
def test_params_of(signature, params):
    assert params_of(signature) == params


def test_the_engine_names_no_protocol_name():
    """The five hand edits of a name (notes/ARCHITECTURE.md) stay five: outside its record, no module of the
    engine (``harness/`` but its adapters and benchmarks) writes a protocol name as a string (a per-name table:
    ``guard.MUTABLE``, ``declarations.FEATURES`` and ``module_tensors.RULES`` were, and are now derived)."""
    sources = [p for p in (ROOT / "harness").rglob("*.py") if p.parent.name not in ("adapters", "bench", "models")]
    named = {str(p.relative_to(ROOT)): [n for n in protocol.NAMES if re.search(rf"""["']{n}["']""", p.read_text())]
             for p in sources if p.name not in ("protocol.py", "name_record.py")}
    assert {p: n for p, n in named.items() if n} == {}
