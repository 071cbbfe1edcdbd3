"""Load a target implementation: a dotted module path or a ``.py`` file path, in a worker
process (``harness.boundary.isolation``) or, for debugging, in this one (``harness.boundary.in_process``).

A target may define any subset of the protocol names (``harness.spec.protocol``).
Loading never raises: a target that does not import becomes a ``Target`` whose
``load_error`` says why, so every property for it reports that message instead
of the whole session dying at collection. Importing the target and reading what it provides is
``harness.boundary.target_import``'s, which runs where the target lives.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from harness.boundary import interpret
from harness.boundary.guard import CallLimit
from harness.boundary.in_process import InProcessBackend
from harness.boundary.isolation import WorkerBackend
from harness.verdicts.outcome import Outcome
from harness.boundary.target_import import BrokenTarget, TargetInfo


@dataclass
class Target:
    """One implementation under test, behind one backend.

    ``isolation="process"`` (the default of every command): the target lives in its own worker
    process (``harness.boundary.isolation.WorkerBackend``) and ``lookup`` returns handles whose calls cross
    to it; ``"none"``: imported here (``harness.boundary.in_process.InProcessBackend``), for debugging with
    pdb. Either answers ``lookup``, ``call``, ``apply``, ``seed_next`` and ``close`` and holds the
    per-call ``limit``."""

    spec: str
    #: conventions given on the command line (``--convention k=v``), overriding the module's
    cli_conventions: dict[str, str] = field(default_factory=dict)
    #: device the suites build their tensors on
    device: str = "cpu"
    info: TargetInfo = field(default_factory=TargetInfo)
    #: where the target lives: ``InProcessBackend`` (the default) or ``WorkerBackend``
    backend: Any = None
    #: the running test's bookkeeping (labels, configurations passed over): a fresh one per test
    outcome: Outcome = field(default_factory=Outcome)
    #: histories (``HistoryConfig`` JSON) that failed on a fresh worker: run fresh whenever replayed
    failed_histories: set = field(default_factory=set)
    #: (property, fixed input) pairs already checked on this target (``runner.unverified``)
    verified: set = field(default_factory=set)
    #: what a suite measured once per target and reuses (key -> value; e.g. the RoPE module's
    #: layout per (head dim, base, device)); keys start with the suite's own name
    measured: dict = field(default_factory=dict)
    #: name -> (worker generation, what ``lookup`` returned): a function, class or module is looked
    #: up once per worker, not once per example (in a worker each lookup is a round trip: 4 in
    #: 10 requests of a conformance run were lookups); plain data is looked up afresh
    looked_up: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.backend is None:
            self.backend = InProcessBackend(self.spec)

    def __repr__(self) -> str:
        return f"Target({self.spec!r})"

    def _repr_pretty_(self, printer, cycle) -> None:
        """Hypothesis prints a test's arguments, this fixture among them, for every example: the
        repr, not a walk through every field (``verified`` and ``measured`` grow over a session)."""
        printer.text(repr(self))

    @property
    def id(self) -> str:
        """Short name for test ids and report columns."""
        return self.spec

    @property
    def isolated(self) -> bool:
        return self.backend.isolated

    @property
    def worker(self) -> WorkerBackend | None:
        """The worker backend when isolated, else None."""
        return self.backend if self.backend.isolated else None

    @property
    def module(self) -> ModuleType | None:
        """The target's module when it is imported here (``--isolation none``), else None."""
        return getattr(self.backend, "module", None)

    @property
    def limit(self) -> CallLimit:
        """The per-call limit of the calls into the target (``--impl-timeout``), and the
        functions that ran past it."""
        return self.backend.limit

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
        """Why the target's declarations rule ``cfg`` out (``declared: ...``), or, interpreted, Triton's
        interpreter computes its dtype wrong (``interpreter: ...``, ``harness.boundary.interpreter_probe``);
        None when neither."""
        dtype = getattr(cfg, "dtype", None)
        if dtype is not None and self.dtypes is not None and dtype not in self.dtypes:
            return f"declared: HARNESS_DTYPES = {tuple(self.dtypes)!r} (this property draws other dtypes)"
        if dtype in self.info.unsupported:
            return f"declared: {dtype} is in HARNESS_UNSUPPORTED"
        if dtype in self.info.interpreter_unsupported:  # ``interpreter: ... wrong in <dtype> under triton X.Y``
            return self.info.interpreter_unsupported[dtype]
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
        generation = getattr(self.backend, "generation", 0)  # (a restarted worker: looked up again)
        hit = self.looked_up.get(name)
        if hit is not None and hit[0] == generation and (not self.isolated or self.backend.alive()):
            return hit[1]  # (a dead worker's handle would be stale: the backend restarts it first)
        value = self.backend.lookup(name)
        if callable(value):  # (a handle into the worker, or a function, class or module here)
            self.looked_up[name] = (getattr(self.backend, "generation", 0), value)  # (after a restart: the new one)
        return value

    def close(self) -> None:
        """Stop the worker (isolated targets); a no-op in-process."""
        self.backend.close()


def load_target(spec: str, *, cli_conventions: dict[str, str] | None = None, device: str = "cpu",
                isolation: str = "none", timeout: float | None = None,
                import_timeout: float | None = None, threads: int | None = None,
                triton_interpret: bool = False) -> Target:
    """Load ``spec`` without raising: in this process (``isolation="none"``) or in a worker
    process (``"process"``: ``harness.boundary.isolation``). A target that does not load is a ``Target``
    whose ``load_error`` says why (cause, file:line, the first lines of its traceback). On a CPU
    device (or with ``triton_interpret``) Triton kernels run under the interpreter
    (``harness.boundary.interpret``), with a per-call limit ``interpret.TIMEOUT_FACTOR`` times longer; compiled
    Triton kernels (a GPU) get ``interpret.JIT_TIMEOUT_FACTOR`` times it, for first-call compiles."""
    how = interpret.mode(device, triton_interpret)
    if isolation == "process":
        backend = WorkerBackend(spec, timeout=timeout, import_timeout=import_timeout, threads=threads,
                                interpret=how)
    elif isolation == "none":
        backend = InProcessBackend(spec, timeout=timeout)
    else:
        raise ValueError(f"isolation must be 'process' or 'none', got {isolation!r}")
    target = Target(spec=spec, cli_conventions=dict(cli_conventions or {}), device=device, backend=backend)
    target.info = backend.start(how)
    return target
