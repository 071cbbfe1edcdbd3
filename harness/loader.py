"""Load a target implementation: a dotted module path or a ``.py`` file path, in a worker
process (``harness.isolation``) or, for debugging, in this one.

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

from harness import declarations, interpret, protocol, provided
from harness.guard import DEFAULT_TIMEOUT, CallLimit
from harness.options import DEFAULT_TARGET  # noqa: F401  (the target without --impl; the plug-in reads it here)
from harness.outcome import Outcome


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
    #: its Triton kernels run under Triton's interpreter (``harness.interpret``)
    interpreted: bool = False
    #: why it does not load (import error, broken declaration, hang, crash); None when it does
    load_error: str | None = None
    #: protocol names it imports from a third-party library and does not provide (``harness.provided``):
    #: name -> the library's top-level package
    ignored: dict[str, str] = field(default_factory=dict)


@dataclass
class Target:
    """One implementation under test.

    ``isolation="process"`` (the default of every command): the target lives in its own worker
    process (``harness.isolation``) and ``lookup`` returns handles whose calls cross to it;
    ``"none"``: imported here (``module``), for debugging with pdb."""

    spec: str
    #: conventions given on the command line (``--convention k=v``), overriding the module's
    cli_conventions: dict[str, str] = field(default_factory=dict)
    #: device the suites build their tensors on
    device: str = "cpu"
    info: TargetInfo = field(default_factory=TargetInfo)
    module: ModuleType | None = None
    #: the worker client (``harness.isolation.Worker``) when isolated
    worker: Any = None
    #: the per-call limit of calls made here (``--isolation none``; the worker keeps its own)
    limit: CallLimit = field(default_factory=CallLimit)
    #: the running test's bookkeeping (labels, configurations passed over): a fresh one per test
    outcome: Outcome = field(default_factory=Outcome)
    #: histories (``HistoryConfig`` JSON) that failed on a fresh worker: run fresh whenever replayed
    failed_histories: set = field(default_factory=set)

    def __repr__(self) -> str:
        return f"Target({self.spec!r})"

    @property
    def id(self) -> str:
        """Short name for test ids and report columns."""
        return self.spec

    @property
    def isolated(self) -> bool:
        return self.worker is not None

    @property
    def load_error(self) -> str | None:
        return self.info.load_error

    @property
    def file(self) -> str:
        return self.info.file

    @property
    def version(self) -> str:
        return self.info.version

    @property
    def conventions(self) -> dict[str, str]:
        conv = dict(self.info.conventions)
        conv.update(self.cli_conventions)
        return conv

    @property
    def dtypes(self) -> tuple[str, ...] | None:
        """The dtypes the target declares it supports (``HARNESS_DTYPES``); None = all.

        FlashAttention-style kernels support only float16/bfloat16; configurations
        with other dtypes are then not drawn for this target (not failed).
        """
        return self.info.dtypes

    @property
    def sizes(self) -> dict[str, Any] | None:
        """The sizes the target declares it supports (``HARNESS_SIZES``): config field name ->
        the allowed values (a range or a set), e.g. ``{"E": range(16, 257, 8)}`` for a kernel that
        needs head dims that are multiples of 8 up to 256. Configurations with other values are
        not drawn for this target (not failed); None = all."""
        return self.info.sizes

    def supports(self, cfg: Any) -> bool:
        """Whether ``cfg``'s dtype and sizes are within what the target declares."""
        return self.declared_out(cfg) is None

    def declared_out(self, cfg: Any) -> str | None:
        """Why the target's declarations rule ``cfg`` out (``declared: ...``), or None when they do not."""
        dtype = getattr(cfg, "dtype", None)
        if dtype is not None and self.dtypes is not None and dtype not in self.dtypes:
            return f"declared: HARNESS_DTYPES = {tuple(self.dtypes)!r} (this property draws other dtypes)"
        if dtype in self.info.unsupported:
            return f"declared: {dtype} is in HARNESS_UNSUPPORTED"
        names = sorted(name for name, allowed in (self.sizes or {}).items()
                       if isinstance(getattr(cfg, name, None), int) and getattr(cfg, name) not in allowed)
        return f"declared: HARNESS_SIZES limits {', '.join(names)}" if names else None

    def available(self) -> list[str]:
        """The protocol names this target defines."""
        return list(self.info.available)

    def lookup(self, name: str) -> Any:
        """Return the attribute ``name`` (a handle into the worker when isolated), or raise
        ``Missing``/``BrokenTarget``.

        The suites turn ``Missing`` into a skip whose reason names the attribute,
        and ``BrokenTarget`` into a failure that says what is wrong.
        """
        if self.load_error is not None:
            raise BrokenTarget(f"target {self.spec!r} could not be loaded: {self.load_error.splitlines()[0]}")
        if self.worker is not None:
            return self.worker.lookup(name)
        return lookup_attribute(self.spec, self.module, name)

    def close(self) -> None:
        """Stop the worker (isolated targets); a no-op in-process."""
        if self.worker is not None:
            self.worker.close()


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


def import_spec(spec: str) -> ModuleType:
    """Import ``spec`` (``pkg.mod`` or ``path/to/file.py``); raises what the import raises."""
    try:
        if spec.endswith(".py") or os.sep in spec or "/" in spec:
            if not os.path.exists(spec):
                raise FileNotFoundError(f"no such file: {spec!r}")
            return _import_file(spec)
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if interpret.missing_triton(exc):
            raise ModuleNotFoundError(interpret.missing_message(spec), name="triton") from None
        raise


def load_target(spec: str, cli_conventions: dict[str, str] | None = None, device: str = "cpu",
                isolation: str = "none", timeout: float | None = None,
                import_timeout: float | None = None, threads: int | None = None,
                triton_interpret: bool = False) -> Target:
    """Load ``spec`` without raising: in this process (``isolation="none"``) or in a worker
    process (``"process"``: ``harness.isolation``). A target that does not load is a ``Target``
    whose ``load_error`` says why (cause, file:line, the first lines of its traceback). On a CPU
    device (or with ``triton_interpret``) Triton kernels run under the interpreter
    (``harness.interpret``), with a per-call limit ``interpret.TIMEOUT_FACTOR`` times longer."""
    how = interpret.mode(device, triton_interpret)
    target = Target(spec=spec, cli_conventions=dict(cli_conventions or {}), device=device,
                    limit=CallLimit(DEFAULT_TIMEOUT if timeout is None else float(timeout)))
    if isolation == "process":
        from harness import isolation as iso
        target.worker = iso.Worker(spec, timeout=timeout, import_timeout=import_timeout, threads=threads,
                                   interpret=how)
        target.info = target.worker.start()
        if target.info.interpreted:
            target.limit.seconds *= interpret.TIMEOUT_FACTOR
        return target
    if isolation != "none":
        raise ValueError(f"isolation must be 'process' or 'none', got {isolation!r}")
    try:
        interpret.prepare(how)
        target.module = import_spec(spec)
    except BaseException as exc:  # noqa: BLE001 - a hostile target may raise anything
        target.info = TargetInfo(load_error=format_load_error(exc, spec))
        return target
    target.info = describe_module(spec, target.module)
    target.info.interpreted = interpret.interpreted(target.module)
    if target.info.interpreted:
        target.limit.seconds *= interpret.TIMEOUT_FACTOR
    return target


def format_load_error(exc: BaseException, spec: str) -> str:
    """One clear load error: the exception, where the target raised it, and the first lines of
    its traceback (the chained exceptions' tracebacks are left out)."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if interpret.missing_triton(exc) and interpret.INSTALL in str(exc):
        return head  # one line that says what to install; the import's frames add nothing
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
