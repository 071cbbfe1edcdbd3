"""Options drawn together: a covering set per protocol name, in which every pair of option values
meets (issue 43).

Real kernels break where two features meet while each alone works (a paged cache with RoPE
tables, a rolling window with GQA, softcap with sinks, several batch items past a tile). A property
that draws one option against the defaults passes such a bug however many examples it runs. So
each name that takes several options lists them here as ``Factor``s, each with its interesting
values and the protocol parameters or features it exercises, and ``covering_rows`` builds a
*pairwise covering array*: a short list of rows (one value per factor) in which every pair of
values of two factors appears together at least once, except the pairs ``Options.forbidden`` names
with a reason. Its size grows with the largest product of two factors' value counts and the log
of the number of factors, not with the product of all of them.

The suites run the rows first on every profile, as explicit examples (``regimes.covering``), each
through the cheap check (agreement with the float64 reference), then random combinations of the
same values (``row_strategy``). ``tests/test_pairwise.py`` checks that every pair is covered,
that every parameter and feature of a name joins its factors or is named in ``not_drawn`` with a
reason, and that docs/suites.md shows the covering set (``describe``).

The construction is the deterministic greedy of AETG (Cohen et al., 1997) restricted to forbidden
pairs: each row starts from the first pair not covered yet, then takes, factor by factor, the
allowed value that covers the most uncovered pairs with the values already chosen (the first such
value in the factor's order on ties). Same input, same rows: a repro line replays them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import strategies as st

__all__ = ["Factor", "Options", "covering_rows", "pairs_of", "required_pairs", "row_seed", "row_strategy",
           "describe"]


@dataclass(frozen=True)
class Factor:
    """One option of a name: its interesting ``values`` (hashable, shown in the docs), what each
    means (``doc``), and the protocol parameters / features it exercises (``exercises``)."""

    name: str
    values: tuple
    exercises: tuple[str, ...]
    doc: str = ""


@dataclass(frozen=True)
class Options:
    """A protocol name's factors and the rows' build into the suite's configuration."""

    protocol_name: str
    factors: tuple[Factor, ...]
    #: a row (factor -> value) -> the configuration a check runs
    build: Callable[[dict], Any]
    #: pairs of (factor, value) that cannot meet, each with why: ``((("window", 5), ("causal", False)), "why")``
    forbidden: tuple[tuple[tuple[tuple[str, Any], tuple[str, Any]], str], ...] = ()
    #: protocol parameters and features no factor exercises, each with why (where it is checked instead)
    not_drawn: dict[str, str] = field(default_factory=dict)

    def factor(self, name: str) -> Factor:
        return next(f for f in self.factors if f.name == name)

    def allowed(self, row: dict) -> bool:
        """No forbidden pair among the row's values (a partial row too)."""
        return not any(row.get(a[0], _NONE) == a[1] and row.get(b[0], _NONE) == b[1] for (a, b), _ in self.forbidden)

    def exercised(self) -> set[str]:
        return {p for f in self.factors for p in f.exercises}


_NONE = object()


def pairs_of(row: dict, names: list[str]) -> set:
    """The pairs ((factor, value), (factor, value)) a complete row covers, in factor order."""
    return {((a, row[a]), (b, row[b])) for a, b in itertools.combinations(names, 2)}


def required_pairs(opts: Options) -> set:
    """Every pair of values of two factors that is not forbidden."""
    names = [f.name for f in opts.factors]
    out = set()
    for fa, fb in itertools.combinations(opts.factors, 2):
        for a, b in itertools.product(fa.values, fb.values):
            if opts.allowed({fa.name: a, fb.name: b}):
                out.add(((fa.name, a), (fb.name, b)))
    assert all(names.index(p[0][0]) < names.index(p[1][0]) for p in out)
    return out


def covering_rows(opts: Options) -> tuple[dict, ...]:
    """The pairwise covering array of ``opts`` (see the module docstring): rows in which every
    required pair meets. Raises ValueError when the forbidden pairs leave a factor no value."""
    names = [f.name for f in opts.factors]
    todo = required_pairs(opts)
    order = {p: i for i, p in enumerate(sorted(todo, key=lambda p: (names.index(p[0][0]), names.index(p[1][0]),
                                                                   repr(p))))}
    rows: list[dict] = []
    while todo:
        (fa, a), (fb, b) = min(todo, key=order.__getitem__)
        row = {fa: a, fb: b}
        for f in opts.factors:
            if f.name in row:
                continue
            best, gain = _NONE, -1
            for value in f.values:
                trial = {**row, f.name: value}
                if not opts.allowed(trial):
                    continue
                covered = sum(1 for other, v in row.items()
                              if _key(names, (f.name, value), (other, v)) in todo)
                if covered > gain:
                    best, gain = value, covered
            if best is _NONE:
                raise ValueError(f"{opts.protocol_name}: no value of {f.name!r} is allowed with {row}")
            row[f.name] = best
        covered = pairs_of(row, names) & todo
        if not covered:  # (cannot happen: the row holds its first pair)
            raise AssertionError(f"{opts.protocol_name}: a covering row covered nothing new")
        todo -= covered
        rows.append({n: row[n] for n in names})
    return tuple(rows)


def _key(names: list[str], x: tuple, y: tuple) -> tuple:
    return (x, y) if names.index(x[0]) < names.index(y[0]) else (y, x)


def row_seed(row: dict, base: int) -> int:
    """A configuration's seed from its row: fixed per row (a repro replays it), different across rows."""
    return base + sum(ord(c) for c in repr(sorted(row.items()))) % 1000


def row_strategy(opts: Options) -> st.SearchStrategy[dict]:
    """Random combinations of the factors' values, forbidden pairs left out."""
    return st.fixed_dictionaries({f.name: st.sampled_from(f.values) for f in opts.factors}).filter(opts.allowed)


def describe(opts: Options, properties: str) -> str:
    """The docs' section on one name's covering set (docs/suites.md; ``tests/test_pairwise.py``
    keeps the two equal): its factors, the forbidden pairs, what is not drawn, and the rows."""
    rows = covering_rows(opts)
    names = [f.name for f in opts.factors]
    n_pairs = len(required_pairs(opts))
    product = 1
    for f in opts.factors:
        product *= len(f.values)
    lines = [f"### `{opts.protocol_name}`", "",
             f"{len(opts.factors)} factors, {n_pairs} pairs of values, covered by {len(rows)} rows "
             f"(all combinations: {product}); run by {properties}.", "",
             "| factor | values | exercises |", "|---|---|---|"]
    for f in opts.factors:
        values = ", ".join(f"`{v}`" for v in f.values)
        lines.append(f"| `{f.name}` | {values}{' — ' + f.doc if f.doc else ''} | {', '.join(f.exercises)} |")
    if opts.forbidden:
        lines += ["", "Pairs that cannot meet:", ""]
        lines += [f"- `{a[0]}={a[1]}` with `{b[0]}={b[1]}`: {why}" for (a, b), why in opts.forbidden]
    if opts.not_drawn:
        lines += ["", "Not drawn here:", ""]
        lines += [f"- `{p}`: {why}" for p, why in sorted(opts.not_drawn.items())]
    lines += ["", "| # | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {i} | " + " | ".join(str(r[n]) for n in names) + " |" for i, r in enumerate(rows)]
    return "\n".join(lines) + "\n"


#: the suites that hold a covering set: module -> (its ``Options`` attributes, the properties that run them)
COVERED = {
    "harness.suites.attention.test_options_together": (("SDPA_OPTIONS", "options_together.sdpa"),
                                                       ("WINDOW_OPTIONS", "options_together.sliding_window"),
                                                       ("VARLEN_OPTIONS", "options_together.varlen")),
    "harness.suites.kvcache.test_kvcache_pairwise": (("OPTIONS", "options_together.kvcache"),),
}
#: the docs' block (docs/suites.md), between these lines: written by scripts/gen_property_docs.py
DOCS_BEGIN = "<!-- GENERATED by `python scripts/gen_property_docs.py` from suites/pairwise.py's COVERED: do not edit -->"
DOCS_END = "<!-- end of the generated covering sets -->"


def all_options() -> list[tuple[Options, str]]:
    """Every name's ``Options`` and the property that runs its covering set (``COVERED``)."""
    import importlib
    return [(getattr(importlib.import_module(module), attr), prop)
            for module, entries in COVERED.items() for attr, prop in entries]


def render_docs() -> str:
    """The generated block of docs/suites.md: one ``describe`` per name."""
    return "\n".join([DOCS_BEGIN, ""] + [describe(opts, f"`{prop}`") for opts, prop in all_options()] + [DOCS_END])


def missing_options(opts: Options, record) -> list[str]:
    """The parameters and features of the protocol ``record`` (``harness.spec.protocol.Name``) that no
    factor of ``opts`` exercises and ``not_drawn`` does not name: an option added to a name
    without joining its covering set."""
    wanted = list(record.params) + sorted(record.features)
    done = opts.exercised() | set(opts.not_drawn)
    return [p for p in wanted if p not in done]


def project(target, cfg, drops: dict[str, dict]):
    """``cfg`` without the options ``target`` declares unsupported (``HARNESS_UNSUPPORTED``, or an
    optional parameter its function does not take): for each such feature, ``drops[feature]``'s
    fields set to their defaults (a value may be a function of ``cfg``). Every pair of values of
    the options it does take still meets in the covering set: a row keeps its other values, so a
    target without paged caches is still held to window x GQA, rotary x softcap, and so on, instead
    of the rows that hold a page being passed over as unsupported."""
    import dataclasses
    off = set(getattr(target.info, "unsupported", ())) | set(getattr(target.info, "lacking", {}) or {})
    changes = {}
    for feature, fields in drops.items():
        if feature in off:
            changes.update({k: (v(cfg) if callable(v) else v) for k, v in fields.items()})
    return dataclasses.replace(cfg, **changes) if changes else cfg
