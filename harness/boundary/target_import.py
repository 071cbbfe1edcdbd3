"""Import a target and read what it provides, where the target lives: in its worker process
(``harness.boundary.worker``) or, with ``--isolation none``, in the harness's (``harness.boundary.in_process``).

A target may define any subset of the protocol names (``harness.spec.protocol``). ``import_spec``
imports a dotted module path or a ``.py`` file; ``describe_module`` reads its ``TargetInfo`` (plain
data: the names it provides, its declarations); ``lookup_attribute`` checks one name against the
protocol (``Missing`` -> skip, ``BrokenTarget`` -> fail).
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

from harness.basics import extras, layout
from harness.spec import declarations, protocol
from harness.boundary import interpret, provided


@dataclass
class TargetInfo:
    """What the harness knows of a target once it is imported: plain data, computed where the
    target lives (this process, or its worker) by ``describe_module``."""

    file: str = "?"
    version: str | None = None  # None: the module has no __version__ / VERSION
    available: tuple[str, ...] = ()
    dtypes: tuple[str, ...] | None = None
    sizes: dict[str, Any] | None = None
    conventions: dict[str, str] = field(default_factory=dict)
    #: features it declares it does not support (``HARNESS_UNSUPPORTED``)
    unsupported: frozenset = frozenset()
    #: features whose optional parameter its function does not take (its protocol record's
    #: ``options``): feature -> why
    lacking: dict[str, str] = field(default_factory=dict)
    #: the block sizes it declares (``HARNESS_TILES``)
    tiles: tuple[int, ...] | None = None
    #: its Triton kernels run under Triton's interpreter (``harness.boundary.interpret``)
    interpreted: bool = False
    #: its Triton kernels are compiled, each configuration on its first call (a GPU)
    jit: bool = False
    #: interpreted: the fixes put into Triton's interpreter in its process (``harness.boundary.interpreter_fixes``)
    interpreter_fixes: tuple[str, ...] = ()
    #: interpreted: dtype -> why its configurations are unsupported, an operation Triton's interpreter
    #: computes wrong in it (``harness.boundary.interpreter_probe``); empty when every one is right
    interpreter_unsupported: dict[str, str] = field(default_factory=dict)
    #: why it does not load (import error, broken declaration, hang, crash); None when it does
    load_error: str | None = None
    #: protocol names it imports from a third-party library and does not provide (``harness.boundary.provided``):
    #: name -> the library's top-level package
    ignored: dict[str, str] = field(default_factory=dict)



def lookup_attribute(spec: str, module: ModuleType, name: str) -> Any:
    """``module.name`` checked against the protocol's signature (``Missing``/``BrokenTarget``);
    a module ``__getattr__`` that raises breaks that name, not the session."""
    try:
        obj = getattr(module, name, _ABSENT)
    except Exception as exc:  # noqa: BLE001 - a hostile module __getattr__
        raise BrokenTarget(f"{spec}.{name}: looking it up raised {type(exc).__name__}: {exc}") from None
    if obj is _ABSENT:
        raise Missing(f"target {spec!r} has no attribute {name!r}")
    source = provided.imported_from(module, name, obj) if name in protocol.NAMES else None
    if source is not None:
        raise Missing(f"target {spec!r} does not provide {name!r}, it imports it; "
                      f"ignored: {provided.ignored_line(name, source)}")
    problem = protocol.signature_problem(name, obj)
    if problem:
        raise BrokenTarget(f"{spec}.{name}: {problem}")
    return obj


_ABSENT = object()


def describe_module(spec: str, module: ModuleType) -> TargetInfo:
    """The ``TargetInfo`` of an imported target; a broken declaration becomes its load error."""
    info = TargetInfo(file=_file_of(module), version=_version_of(module))
    names = []
    for n in protocol.NAMES:
        try:
            obj = getattr(module, n, _ABSENT)
        except Exception:  # noqa: BLE001 - listed, and its lookup says what is wrong
            names.append(n)
            continue
        source = None if obj is _ABSENT else provided.imported_from(module, n, obj)
        if source is not None:
            info.ignored[n] = source
        elif obj is not _ABSENT:
            names.append(n)
            info.lacking.update(protocol.lacking_features(n, obj))
    info.available = tuple(names)
    try:
        info.dtypes = declarations.dtypes(module)
        info.sizes = declarations.sizes(module, declarations.config_fields())
        info.conventions = declarations.conventions(module)
        info.unsupported = declarations.unsupported(module)
        info.tiles = declarations.tiles(module)
    except declarations.DeclarationError as exc:
        info.load_error = f"broken declaration: {exc}"
    return info


def _file_of(module: ModuleType) -> str:
    f = getattr(module, "__file__", None)
    return f if isinstance(f, str) else "<built-in>"


def _version_of(module: ModuleType) -> str:
    top = sys.modules.get(str(getattr(module, "__name__", "")).split(".")[0])
    for obj, attr in ((module, "__version__"), (module, "VERSION"), (top, "__version__")):
        try:
            value = getattr(obj, attr, None)
        except Exception:  # noqa: BLE001 - a module __getattr__ that raises
            value = None
        if isinstance(value, str):
            return value
    return None


class Missing(Exception):
    """The target does not define a protocol name (a skip, not a failure)."""


class BrokenTarget(Exception):
    """The target cannot be used for this name: import error, wrong signature."""


def _module_name_for_file(path: str) -> str:
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"harness_target_{stem}_{digest}"


def _shadowed_siblings(path: str) -> list[str]:
    """Modules cached in ``sys.modules`` under the name of a sibling of the file ``path`` (a
    ``utils.py`` or ``_base.py`` next to it) but loaded from another folder: a file target that
    puts its folder on sys.path and imports its sibling would get the stale one. Two kernel folders
    each with a ``_base.py``, loaded in one process (``--isolation none``, a test session), gave the
    second folder's target the first folder's base class."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        siblings = {os.path.splitext(f)[0] for f in os.listdir(folder) if f.endswith(".py")}
    except OSError:
        return []
    stale = []
    for name in siblings:
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if file and os.path.dirname(os.path.abspath(file)) != folder:
            stale.append(name)
    return stale


def _import_file(path: str) -> ModuleType:
    name = _module_name_for_file(path)
    if name in sys.modules:
        return sys.modules[name]
    for stale in _shadowed_siblings(path):  # (the target's own sibling is imported afresh)
        del sys.modules[stale]
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


def import_spec(spec: str) -> ModuleType:
    """Import ``spec`` (``pkg.mod`` or ``path/to/file.py``); raises what the import raises."""
    try:
        if spec.endswith(".py") or os.sep in spec or "/" in spec:
            if not os.path.exists(spec):
                raise FileNotFoundError(f"no such file: {spec!r}")
            return _import_file(spec)
        return importlib.import_module(layout.builtin_module(spec) or spec)
    except ModuleNotFoundError as exc:
        if interpret.missing_triton(exc):
            raise ModuleNotFoundError(interpret.missing_message(spec), name="triton") from None
        raise


def import_and_describe(spec: str, how: str) -> tuple[ModuleType, TargetInfo]:
    """Import ``spec`` (after ``interpret.prepare(how)``: TRITON_INTERPRET before its kernels are
    decorated) and read its ``TargetInfo``; raises what the import raises."""
    interpret.prepare(how)
    module = import_spec(spec)
    info = describe_module(spec, module)
    info.interpreted = interpret.interpreted(module)
    if info.interpreted:
        interpret.compiled_scalars()
        info.interpreter_fixes, info.interpreter_unsupported = interpret.check_interpreter()
    else:
        info.jit = interpret.jit_compiled(module)
    return module, info


def load_here(spec: str, how: str) -> tuple[ModuleType | None, TargetInfo]:
    """``import_and_describe`` that never raises: a target that does not import gives None and a
    ``TargetInfo`` whose ``load_error`` says why (caught here, so the traceback starts here)."""
    try:
        return import_and_describe(spec, how)
    except BaseException as exc:  # noqa: BLE001 - a hostile target may raise anything
        return None, TargetInfo(load_error=format_load_error(exc, spec))


def format_load_error(exc: BaseException, spec: str) -> str:
    """One clear load error: the exception, where the target raised it, and the first lines of
    its traceback (the chained exceptions' tracebacks are left out)."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if interpret.missing_triton(exc) and interpret.INSTALL in str(exc):
        return head  # one line that says what to install; the import's frames add nothing
    hint = extras.hint_for(exc)  # an optional dependency of the harness (an adapter's transformers): say its extra
    if hint is not None:
        return f"{head}{_innermost_frame(exc, spec)}\n  {hint}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen") and f.filename != __file__]
    where = _innermost_frame(exc, spec)
    tail = "".join(traceback.format_list(frames[-4:])).rstrip() if frames else ""
    return f"{head}{where}" + (f"\n  traceback (innermost last):\n{tail}" if tail else "")


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
