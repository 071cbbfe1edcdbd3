"""Load a target implementation: a dotted module path or a ``.py`` file path.

A target may define any subset of the protocol names (``harness.protocol``).
Loading never raises: a target that does not import becomes a ``Target`` whose
``load_error`` says why, so every property for it reports that message instead
of the whole session dying at collection.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from harness import protocol
from harness.conventions import declared_conventions

#: the built-in reference implementations, used when no ``--impl`` is given
DEFAULT_TARGET = "reference"


@dataclass
class Target:
    """One implementation under test."""

    spec: str
    module: ModuleType | None = None
    load_error: str | None = None
    #: conventions given on the command line (``--convention k=v``), overriding the module's
    cli_conventions: dict[str, str] = field(default_factory=dict)
    #: device the suites build their tensors on
    device: str = "cpu"

    def __repr__(self) -> str:
        return f"Target({self.spec!r})"

    @property
    def id(self) -> str:
        """Short name for test ids and report columns."""
        return self.spec

    @property
    def file(self) -> str:
        if self.module is None:
            return "?"
        return getattr(self.module, "__file__", None) or "<built-in>"

    @property
    def version(self) -> str:
        if self.module is None:
            return "?"
        for attr in ("__version__", "VERSION"):
            if isinstance(getattr(self.module, attr, None), str):
                return getattr(self.module, attr)
        top = sys.modules.get(self.module.__name__.split(".")[0])
        if top is not None and isinstance(getattr(top, "__version__", None), str):
            return top.__version__
        return "unversioned"

    @property
    def conventions(self) -> dict[str, str]:
        conv = declared_conventions(self.module)
        conv.update(self.cli_conventions)
        return conv

    @property
    def dtypes(self) -> tuple[str, ...] | None:
        """The dtypes the target declares it supports (``HARNESS_DTYPES``); None = all.

        FlashAttention-style kernels support only float16/bfloat16; configurations
        with other dtypes are then not drawn for this target (not failed).
        """
        declared = getattr(self.module, "HARNESS_DTYPES", None) if self.module else None
        return tuple(str(d).replace("torch.", "") for d in declared) if declared else None

    @property
    def sizes(self) -> dict[str, Any] | None:
        """The sizes the target declares it supports (``HARNESS_SIZES``): config field name ->
        the allowed values (anything with ``in``: a range, a set), e.g. ``{"E": range(16, 257, 8)}``
        for a kernel that needs head dims that are multiples of 8 up to 256. Configurations with
        other values are not drawn for this target (not failed); None = all."""
        declared = getattr(self.module, "HARNESS_SIZES", None) if self.module else None
        if declared is None:
            return None
        if not isinstance(declared, dict) or not all(hasattr(v, "__contains__") for v in declared.values()):
            raise BrokenTarget(f"target {self.spec!r}: HARNESS_SIZES must map config field names to "
                               f"collections of allowed values (e.g. {{'E': range(16, 257, 8)}}), "
                               f"got {declared!r}")
        return dict(declared)

    def supports(self, cfg: Any) -> bool:
        """Whether ``cfg``'s dtype and sizes are within what the target declares."""
        dtype = getattr(cfg, "dtype", None)
        if dtype is not None and self.dtypes is not None and dtype not in self.dtypes:
            return False
        for name, allowed in (self.sizes or {}).items():
            value = getattr(cfg, name, None)
            if isinstance(value, int) and value not in allowed:
                return False
        return True

    def available(self) -> list[str]:
        """The protocol names this target defines."""
        if self.module is None:
            return []
        return [n for n in protocol.NAMES if hasattr(self.module, n)]

    def lookup(self, name: str) -> Any:
        """Return the attribute ``name``, or raise ``Missing``/``BrokenTarget``.

        The suites turn ``Missing`` into a skip whose reason names the attribute,
        and ``BrokenTarget`` into a failure that says what is wrong.
        """
        if self.load_error is not None:
            raise BrokenTarget(f"target {self.spec!r} could not be loaded:\n{self.load_error}")
        if not hasattr(self.module, name):
            raise Missing(f"target {self.spec!r} has no attribute {name!r}")
        obj = getattr(self.module, name)
        problem = protocol.signature_problem(name, obj)
        if problem:
            raise BrokenTarget(f"{self.spec}.{name}: {problem}")
        return obj


class Missing(Exception):
    """The target does not define a protocol name (a skip, not a failure)."""


class BrokenTarget(Exception):
    """The target cannot be used for this name: import error, wrong signature."""


def _module_name_for_file(path: str) -> str:
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"harness_target_{stem}_{digest}"


def _import_file(path: str) -> ModuleType:
    name = _module_name_for_file(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot build an import spec for {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_target(spec: str, cli_conventions: dict[str, str] | None = None,
                device: str = "cpu") -> Target:
    """Import ``spec`` (``pkg.mod`` or ``path/to/file.py``) without raising."""
    target = Target(spec=spec, cli_conventions=dict(cli_conventions or {}), device=device)
    try:
        if spec.endswith(".py") or os.sep in spec or "/" in spec:
            if not os.path.exists(spec):
                raise FileNotFoundError(f"no such file: {spec!r}")
            target.module = _import_file(spec)
        else:
            target.module = importlib.import_module(spec)
    except BaseException as exc:  # noqa: BLE001 - a hostile target may raise anything
        if isinstance(exc, KeyboardInterrupt):
            raise
        tb = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        where = _innermost_frame(exc, spec)
        target.load_error = f"{tb}{where}"
    return target


def _innermost_frame(exc: BaseException, spec: str) -> str:
    """Where the target itself failed: a SyntaxError's own line, else the innermost frame
    outside the import machinery and this loader."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"\n  (at {exc.filename}:{exc.lineno})"
    if isinstance(exc, FileNotFoundError):
        return ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen") and f.filename != __file__]
    if not frames:
        return ""
    last = frames[-1]
    return f"\n  (raised at {last.filename}:{last.lineno})"


def describe(obj: Any) -> str:
    """``name(signature)`` for messages; builtins may have no signature."""
    try:
        return f"{getattr(obj, '__name__', obj)}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return str(getattr(obj, "__name__", obj))
