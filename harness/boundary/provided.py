"""Which protocol names a target provides: the ones it defines, not the ones it happens to import.

A target file that builds its ``apply_rotary_embedding`` on ``from rotary_embedding_torch import
RotaryEmbedding`` has a module attribute named like the protocol class ``RotaryEmbedding``; that
library class is not the target's implementation of the protocol (its constructor takes other
parameters), so it is ignored, and the report header says so. The rule:

- an object defined in a module imported from an installed third-party distribution counts only
  when the target lists its name in ``__all__``;
- everything else is the target's own: what it defines; what comes from its own top-level package
  or distribution (``--impl torch.nn`` provides torch's ``LayerNorm``, ``--impl torch.nn.functional``
  its C ``scaled_dot_product_attention``, a package's ``__init__`` re-exports its submodules');
  the user's helper modules (a module not imported from an installed distribution: a sibling
  file on ``sys.path``, a source checkout); a distribution installed from a local directory
  (``pip install -e .`` / ``pip install .``: the user's working copy); this project's own
  distribution (``reference``, ``harness.adapters``: the protocol's implementations by design).

Where an object is defined: a class's ``__module__``; a Python function's ``__module__`` or the
module whose globals it runs in (``functools.wraps`` copies the first, ``torch.compile`` keeps
it); a builtin's ``__module__`` or the module it is bound to (``torch._C._nn``). An object whose
origin cannot be read counts as the target's own: ignoring is only for a positive finding.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from importlib import metadata
from types import ModuleType
from typing import Any

#: this project's top-level package (its distribution's other packages, ``reference``, come with it)
_HARNESS_TOP = __name__.split(".")[0]


def imported_from(module: ModuleType, name: str, obj: Any) -> str | None:
    """The top-level package of the third-party distribution that ``module.name`` (``obj``)
    comes from when the target does not provide it (see the module doc), else None."""
    if name in _exported(module):
        return None
    origins = _origins(obj)
    if not origins:
        return None
    tops = {o.split(".")[0] for o in origins}
    own_top = str(getattr(module, "__name__", "")).split(".")[0]
    foreign = [t for t in tops if not _is_own(t, own_top)]
    return sorted(foreign)[0] if len(foreign) == len(tops) else None


def ignored_line(name: str, source: str) -> str:
    """The one line the report header and the skip reason give an ignored name."""
    return f"{name} (from {source}; list it in `__all__` to test it)"


def _exported(module: ModuleType) -> frozenset[str]:
    try:
        names = getattr(module, "__all__", ())
        return frozenset(n for n in names if isinstance(n, str))
    except Exception:  # noqa: BLE001 - a module __getattr__ that raises, a non-iterable __all__
        return frozenset()


def _origins(obj: Any) -> list[str]:
    """The module names where ``obj`` may be defined (any one of them owned makes it owned)."""
    found: list[Any] = []
    try:
        if isinstance(obj, type):
            found = [obj.__module__]
        elif inspect.isfunction(obj):
            found = [obj.__module__, obj.__globals__.get("__name__")]
        elif inspect.isbuiltin(obj):
            bound = getattr(obj, "__self__", None)
            found = [obj.__module__, bound.__name__ if isinstance(bound, ModuleType) else None]
        # any other object (an instance, a constant) has no reliable origin: the target's own
    except Exception:  # noqa: BLE001 - a hostile descriptor: no finding, so its own
        return []
    return [o for o in found if isinstance(o, str) and o]


def _is_own(top: str, own_top: str) -> bool:
    if top == own_top:
        return True
    root = _import_root(top)
    if root is None:
        return True  # a builtin or frozen module, or not imported as a module: no distribution
    dists = [d for d in _distributions().get(top, ()) if _installed_at(d, root)]
    if not dists:
        return True  # not from an installed distribution: a user's helper, a source checkout
    own = set(_distributions().get(own_top, ())) | set(_distributions().get(_HARNESS_TOP, ()))
    return any(d in own or _from_local_directory(d, root) for d in dists)


def _import_root(top: str) -> str | None:
    """The ``sys.path`` directory the top-level module ``top`` was imported from."""
    spec = getattr(sys.modules.get(top), "__spec__", None)
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or ())
    origin = spec.origin if spec.origin not in (None, "built-in", "frozen") else None
    if origin and locations:  # a package: .../root/top/__init__.py
        return os.path.dirname(os.path.dirname(origin))
    if origin:
        return os.path.dirname(origin)
    return os.path.dirname(locations[0]) if locations else None  # a namespace package


@functools.lru_cache(maxsize=8)
def _distributions_for(path: tuple[str, ...]) -> dict[str, list[str]]:
    return metadata.packages_distributions()


def _distributions() -> dict[str, list[str]]:
    """Top-level package -> distribution names, for the current ``sys.path`` (computed once per
    path: ``packages_distributions`` reads every installed distribution's file list)."""
    return _distributions_for(tuple(sys.path))


@functools.lru_cache(maxsize=256)
def _installed_at(dist: str, root: str) -> bool:
    """Whether distribution ``dist`` is installed in the ``sys.path`` directory ``root``."""
    return next(iter(metadata.distributions(name=dist, path=[root])), None) is not None


@functools.lru_cache(maxsize=256)
def _from_local_directory(dist: str, root: str) -> bool:
    """Whether ``dist`` was installed from a local directory (PEP 610 ``dir_info``)."""
    found = next(iter(metadata.distributions(name=dist, path=[root])), None)
    try:
        return "dir_info" in json.loads(found.read_text("direct_url.json") or "{}")
    except (AttributeError, ValueError):
        return False
