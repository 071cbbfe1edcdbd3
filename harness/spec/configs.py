"""The configuration contract: what a suite draws, what crosses to the worker, what a repro replays.

The suites draw *configurations*, not tensors: shapes, dtype and a seed. The
tensors are rebuilt from the seed, so a shrunk counterexample is a handful of
integers that ``python -m harness repro`` can replay exactly.

This module holds the base (``Config``: JSON round trip, seeded generator; ``@register``); the
strategies every family shares are the suites' (``suites/strategies.py``). Each family's
configurations sit beside its suites, in ``<suites>/<family>/configs.py``, and register their
types with ``@register``. The harness names
no suite: an entry point (the pytest plug-in, ``python -m harness``) passes the suites' directory
to ``add_source``, which imports every ``*/configs.py`` under it (``load_families`` imports them
again where needed), so that ``Config.from_json`` and ``HARNESS_SIZES`` know every type; a
target's worker is given the same directories.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64,
          "float16": torch.float16, "bfloat16": torch.bfloat16}

_REGISTRY: dict[str, type] = {}

#: the directories whose ``*/configs.py`` define configuration types (``add_source``), and the
#: modules found there (dotted names, in the order they were imported)
_SOURCES: list[str] = []
_MODULES: list[str] = []


def register(cls):
    _REGISTRY[cls.__name__] = cls
    return cls


@dataclass(frozen=True)
class Config:
    """Base: JSON round trip and a seeded generator."""

    def to_json(self) -> str:
        return json.dumps({"type": type(self).__name__, **dataclasses.asdict(self)},
                          separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> "Config":
        data = json.loads(text)
        name = data.pop("type")
        if name not in _REGISTRY:
            load_families()
        cls = _REGISTRY[name]
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def generator(self, salt: int = 0) -> torch.Generator:
        return torch.Generator().manual_seed((getattr(self, "seed", 0) * 1_000_003 + salt) % 2**63)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[getattr(self, "dtype")]


def add_source(directory: str | Path) -> None:
    """Register ``directory`` (the suites' folder: one sub-folder per family) as a home of
    configuration types, and import its families' ``configs.py`` now (``load_families``)."""
    register_source(directory)
    load_families()


def register_source(directory: str | Path) -> None:
    """Register ``directory`` without importing anything yet (a worker: its target's import
    comes first, and ``load_families`` imports them when a type is needed)."""
    directory = str(Path(directory).resolve())
    if directory not in _SOURCES:
        _SOURCES.append(directory)


def sources() -> tuple[str, ...]:
    """The directories registered with ``add_source`` (a worker is given them)."""
    return tuple(_SOURCES)


def family_modules() -> list[str]:
    """The dotted names of the configuration modules imported so far."""
    return list(_MODULES)


def load_families() -> None:
    """Import every family's configuration module under the registered directories, so each
    ``@register``ed type is known. A module is imported under its package's dotted name (the
    name the suites import it by, so its classes are theirs); the folder above its top package
    goes on ``sys.path`` when it is not there."""
    for directory in _SOURCES:
        for path in sorted(Path(directory).glob("*/configs.py")):
            name, root = _dotted(path)
            if root is not None and str(root) not in sys.path:
                sys.path.insert(0, str(root))
            importlib.import_module(name)
            if name not in _MODULES:
                _MODULES.append(name)


def _dotted(path: Path) -> tuple[str, Path | None]:
    """``path``'s module name (through the packages above it: the folders with an
    ``__init__.py``) and the folder above its top package (None: importable already). The harness's own suites are
    ``harness.suites.*`` wherever their folder is (a checkout's top level or an installed wheel:
    ``harness.basics.layout``), the name the suites import them by."""
    from harness.basics import layout
    ours = layout.suite_module(path)
    if ours:
        return ours, None
    parts, folder = [path.stem], path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts), folder


@register
@dataclass(frozen=True)
class HistoryConfig(Config):
    """Calls of one protocol function ``name`` on the same target, in order: ``calls`` holds each
    call's configuration (a family's ``Config``) as its JSON text, so the whole history replays
    from this one line (``suites/histories.py``)."""

    name: str
    calls: tuple[str, ...]

    def configs(self) -> list[Config]:
        return [Config.from_json(c) for c in self.calls]

    def __str__(self) -> str:
        return f"HistoryConfig({self.name}: " + "; ".join(str(c) for c in self.configs()) + ")"
