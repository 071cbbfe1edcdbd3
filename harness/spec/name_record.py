"""One protocol name's record (``Name``) and the reading of a documented signature (``params_of``).

A leaf: ``harness/spec/protocol.py`` holds the records themselves and every table derived from them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class Name:
    """Everything the harness knows about one protocol name; ``NAMES`` and the tables below are
    derived from these records (see the module docstring)."""

    name: str = field(kw_only=False)
    #: as README.md / docs/*.md document it, character for character; ``params`` derive from it
    signature: str
    #: its suite folder ``suites/<family>/`` (its properties carry ``@pytest.mark.needs(name)``)
    family: str
    #: the module of ``reference/`` that defines it (``reference/__init__.py`` re-exports it)
    reference: str
    kind: str = "function"  # or "class", or "constant" (a module-level value, not called)
    #: the parameters it may write in place, by keyword (their positions derive from ``params``):
    #: ``guard.MUTABLE``; every other input must come back unmodified
    writes: tuple[str, ...] = ()
    #: its output must be new memory, never a view of an input (``guard.NO_ALIAS``): an attention
    #: output that aliases its query is overwritten by (or overwrites) the caller's next in-place op
    new_memory: bool = False
    #: ``HARNESS_UNSUPPORTED`` features of this name: feature -> what a target declaring it lacks
    features: dict[str, str] = field(default_factory=dict, hash=False)
    #: the consistency section (suites/consistency/): how two targets' outputs are compared
    #: (it then has a ``Case`` in ``CASES``), or why they are not; a constant has neither
    compared: str = ""
    not_compared: str = ""
    #: what it must compute, in a sentence or two: the protocol table's second column (docs/protocol.md's
    #: table is generated from the records: ``python scripts/gen_property_docs.py``)
    contract: str = ""
    #: a module's tensors the harness writes or reads (``harness/boundary/module_tensors.py``): role -> the attribute
    #: path the protocol requires, or None (found by its shape); ``tensors_named_as``: whose names those are
    tensors: dict[str, str | None] = field(default_factory=dict, hash=False)
    tensors_named_as: str = ""
    #: optional parameters (added after the name's first version): parameter -> the feature (of
    #: ``features``) it carries. A function whose signature lacks one (and takes no ``**kwargs``)
    #: does not support that feature, as if it declared it (``lacking_features``); it is not broken
    options: dict[str, str] = field(default_factory=dict, hash=False)
    #: derived: the parameter names the harness passes by keyword/position; they must be accepted
    #: (``options`` excepted)
    params: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        params = params_of(self.signature, self.name)
        if params is None:
            raise ValueError(f"{self.name}: cannot read the parameters of {self.signature!r}")
        object.__setattr__(self, "params", params)
        if self.kind not in ("function", "class", "constant"):
            raise ValueError(f"{self.name}: kind {self.kind!r}")
        if bool(self.compared) + bool(self.not_compared) != (self.kind != "constant"):
            raise ValueError(f"{self.name}: give exactly one of compared= / not_compared= "
                             f"(neither for a constant, which is never called)")
        if not set(self.writes) <= set(params):
            raise ValueError(f"{self.name}: writes {self.writes} names no parameter of {params}")
        if not set(self.options) <= set(params) or not set(self.options.values()) <= set(self.features):
            raise ValueError(f"{self.name}: options {self.options} name no parameter of {params} "
                             f"or no feature of {sorted(self.features)}")

    @property
    def required(self) -> tuple[str, ...]:
        """The parameters a target's function must accept: ``params`` without ``options``."""
        return tuple(p for p in self.params if p not in self.options)


def params_of(signature: str, name: str | None = None) -> tuple[str, ...] | None:
    """The parameter names of a documented signature or call: the first parentheses after the
    name (``f(a, b=1, *, c=None) -> T``, ``Cls(a, b); forward(x)``; ``a (B, L)`` and ``a: T`` are
    ``a``); () for a constant (``NAME = ...``). None when it is not one (another name, or an
    argument that is a value, not a name: ``alibi_bias(8, 4, 4)``)."""
    head = re.match(r"\s*(\w+)\s*(\(|=|$)", signature)
    if head is None or (name is not None and head.group(1) != name):
        return None
    if head.group(2) != "(":
        return ()
    parts, depth, quote, start = [], 0, "", head.end()
    for i in range(head.end(), len(signature)):
        ch = signature[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
        elif ch == ")" or (ch == "," and not depth):
            parts.append(signature[start:i].strip())
            start = i + 1
            if ch == ")":
                break
    else:
        return None  # unclosed
    out = []
    for part in parts:
        if part in ("", "*", "/"):
            continue
        m = re.match(r"\*{0,2}([A-Za-z_]\w*)\s*($|=|:|\()", part)
        if m is None:
            return None
        out.append(m.group(1))
    return tuple(out)
