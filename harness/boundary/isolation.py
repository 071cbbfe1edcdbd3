"""Target isolation: the harness's side of a target's worker process (``harness.boundary.worker``).

One persistent worker per target, forked from a fresh forkserver (``spawn``-like: none of the harness's
state) that preloaded torch, so a worker starts in tens of milliseconds. The harness never imports the
target; references, the tolerance policy and every comparison stay in this process.

- A call that does not return within the per-call limit, unless it keeps computing (then it is
  slow, not hung, up to a ceiling of CPU time: ``harness.boundary.progress``), gets the worker's process
  group SIGKILLed (whatever the target does with signals, threads or retry loops); the call fails
  with "did not return within the per-call limit", and the next call starts a fresh worker.
- A call that kills the worker (a signal, ``os._exit``, a segfault, an OOM kill) fails with
  "the worker process died with SIGSEGV during name(args)" and the last output it printed.
- The import runs in the worker under ``import_timeout``.
- Output the target prints is captured per call and capped (first and last KiB).
Handles (``Remote``) stand for the worker's objects; plain data comes back by value. A call may be read
later (``send`` returns a ``harness.boundary.pending.Pending``; one request in flight). ``WorkerBackend`` is a
``Target``'s worker backend (``harness.boundary.in_process`` the other); the worker applies the call
rules of ``harness.boundary.guard``.
"""
from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import os
import select
import signal
import sys

import torch

from harness.basics import options
from harness.spec import configs
from harness.boundary import guard, progress, wire, worker
from harness.boundary.handles import Remote, _renamed, materialize
from harness.boundary.interpret import INSTALL, limit_factor
from harness.boundary.pending import Pending
from harness.boundary.target_import import BrokenTarget, Missing, TargetInfo

__all__ = ["WorkerBackend", "WorkerLost", "TargetRaised", "preload", "DEFAULT_IMPORT_TIMEOUT", "OUTPUT_BUDGET"]

#: the import of a target may take longer than a call (``--import-timeout``)
DEFAULT_IMPORT_TIMEOUT = options.IMPORT_TIMEOUT_S
#: characters of a target's output forwarded per test (each call's is capped first)
OUTPUT_BUDGET = 16 * 1024
_PRELOAD = ["torch", "harness.boundary.worker", "harness.boundary.target_import"]
_LIVE: set["WorkerBackend"] = set()
_context = None


def preload(modules) -> bool:
    """Also import ``modules`` in the forkserver that every worker forks from, so that no
    worker, restarted ones included, imports them under a per-call limit (``harness bench``:
    its suites import transformers). False when the forkserver has started already."""
    if _context is not None:
        return False
    _PRELOAD.extend(m for m in modules if m not in _PRELOAD)
    return True


def _ctx():
    global _context
    if _context is None:
        _context = mp.get_context("forkserver")  # (with the configuration modules discovered by now)
        _context.set_forkserver_preload(_PRELOAD + [m for m in configs.family_modules() if m not in _PRELOAD])
    return _context


@contextlib.contextmanager
def _main_hidden():
    """Start a worker without multiprocessing re-importing the harness's ``__main__`` in it
    (pytest's, a script's, the console entry point's): the worker needs none of it."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__spec__ = None
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)
            if "__spec__" not in saved:
                main.__dict__.pop("__spec__", None)


class TargetRaised(Exception):
    """Stands for an exception the target raised in its worker (the ``__cause__`` of the
    ``ImplementationError``): ``type_name`` and ``message`` are the original's."""

    def __init__(self, type_name: str, message: str, where: str = ""):
        super().__init__(f"{type_name}: {message}")
        self.type_name, self.message, self.where = type_name, message, where


class WorkerLost(guard.ImplementationError):
    """The worker died or was killed during a request."""


class WorkerBackend:
    """The harness's end of one target's worker process: the worker backend of a ``Target``."""

    isolated = True

    def __init__(self, spec: str, timeout: float | None = None, import_timeout: float | None = None,
                 threads: int | None = None, interpret: str = "off"):
        self.spec = spec
        #: the per-call limit, and the names that ran past it (not called again)
        self.limit = guard.CallLimit(guard.DEFAULT_TIMEOUT if timeout is None else float(timeout))
        self.import_timeout = DEFAULT_IMPORT_TIMEOUT if import_timeout is None else float(import_timeout)
        self.threads = threads
        self.interpret = interpret  # harness.boundary.interpret.mode: TRITON_INTERPRET in the worker
        self.generation = 0
        self.process = self.conn = None
        self.garbage: list[int] = []
        self.next_seed: int | None = None
        self.forwarded = self.withheld = 0
        self.output_path = None
        self.info = None
        self.setup: tuple | None = None  # (fn, args): run after the import in every new worker
        self.in_flight: Pending | None = None  # a request sent whose reply is not read yet (``send``)

    @property
    def timeout(self) -> float:
        """Seconds one call may take (``--impl-timeout``; longer under Triton's interpreter)."""
        return self.limit.seconds

    # -- life cycle --------------------------------------------------------------------------
    def start(self, how: str | None = None):
        """Start the worker and import the target (``how``: ``harness.boundary.interpret.mode``, else the
        one given at construction); returns its ``TargetInfo`` (with ``load_error`` set when it
        does not load: the exception, a hang, a crash)."""
        if how is not None:
            self.interpret = how
        try:
            self._spawn()
            self.info = self.request(self._load_request(), f"import of {self.spec}",
                                     timeout=self.import_timeout, limit_name="--import-timeout")
            # Triton's interpreter, or compiled kernels' first-call JIT: a per-call limit sized for it
            self.limit.seconds *= limit_factor(self.info)
        except guard.ImplementationError as exc:
            cause = exc.__cause__
            if isinstance(cause, TargetRaised):
                text = f"{cause.type_name}: {cause.message}"
                if cause.where and INSTALL not in cause.message:
                    text += "\n" + worker.trimmed_traceback(cause.where)
            else:
                text = str(exc)
            self.info = TargetInfo(load_error=text)
            self.close()
        return self.info

    def _load_request(self) -> tuple:
        """Import the target, after the configuration types' modules (``harness.spec.configs``)."""
        return ("load", self.spec, self.interpret, configs.sources())

    def _spawn(self) -> None:
        self.generation += 1
        self.garbage.clear()
        self.limit.called.clear()  # (a name's first call in this worker gets the import allowance)
        self.output_path = self.output_path or worker.scratch_file()
        self.imports = _ctx().RawValue("q", 0)  # the modules the worker imported (``progress.Clock``)
        parent, child = _ctx().Pipe()
        self.process = _ctx().Process(target=worker.main, name=f"harness-worker:{self.spec}",
                                      args=(child, self.generation, self.threads, self.output_path, self.imports))
        with _main_hidden():
            self.process.start()
        child.close()
        self.conn = parent
        self._exit_watch = select.poll()  # (``alive``: the sentinel is readable once the process ended)
        self._exit_watch.register(self.process.sentinel, select.POLLIN)
        _LIVE.add(self)

    def _restart(self) -> None:
        self._spawn()
        info = self.request(self._load_request(), f"import of {self.spec} (restarting its worker)",
                            timeout=self.import_timeout, limit_name="--import-timeout")
        if info.load_error:
            raise guard.ImplementationError(f"restarting the worker of {self.spec!r}: {info.load_error}")
        if self.setup is not None:
            self._apply_setup()

    def set_up(self, fn, *args):
        """Run ``fn(*args)`` (harness code: process-wide settings) in the worker now, and again
        in every worker started after a crash or a timeout; under the import limit."""
        self.setup = (fn, args)
        return self._apply_setup()

    def _apply_setup(self):
        fn, args = self.setup
        return self.request(("apply", fn, args, {}, self._ctx()), f"{fn.__name__}(...) (worker set-up)",
                            timeout=self.import_timeout, harness_code=True, limit_name="--import-timeout")

    def alive(self) -> bool:
        """Whether the worker runs: its sentinel polled (``is_alive`` costs ~20 us, every request)."""
        return self.process is not None and not self._exit_watch.poll(0)

    def kill(self) -> None:
        """SIGKILL the worker's process group (its children, its threads) and reap it."""
        p = self.process
        if p is None:
            return
        if p.pid and self.alive():
            for kill in (lambda: os.killpg(p.pid, signal.SIGKILL), lambda: os.kill(p.pid, signal.SIGKILL)):
                try:
                    kill()
                except (ProcessLookupError, PermissionError):
                    pass
        p.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.process = self.conn = None
        _LIVE.discard(self)

    def close(self) -> None:
        """Stop the worker: it is killed (a target's stray non-daemon thread must not keep a
        session alive); its scratch file is removed."""
        self.kill()
        if self.output_path and os.path.exists(self.output_path):
            os.unlink(self.output_path)
        self.output_path = None

    # -- requests ----------------------------------------------------------------------------
    def lookup(self, name: str):
        reply = self.request(("lookup", name), f"lookup of {name}", kinds=True)
        kind, value = reply
        if kind == "missing":
            raise Missing(value)
        if kind == "broken":
            raise BrokenTarget(value)
        return value if not isinstance(value, Remote) else _renamed(value, name)

    def call(self, remote: Remote, name: str, args: tuple, kwargs: dict, wait: bool = True):
        """``remote(*args, **kwargs)`` in the worker, under the call rules (``harness.boundary.guard``: the
        worker judges the inputs with ``guard.Inputs``); ``wait=False``: a ``Pending`` of it."""
        call_text = guard.Described(name, args, kwargs)
        self.limit.refuse_if_hung(name, name)
        if remote._ref.generation != self.generation:
            if not self.alive():
                self._restart()
            if name in self.info.available:  # a protocol name: looked up again in the new worker
                fresh = self.lookup(name)
                remote = fresh if isinstance(fresh, Remote) else remote
        if remote._ref.generation != self.generation:
            raise guard.ImplementationError(
                f"{name}: this object was lost when the worker of {self.spec!r} restarted after an "
                f"earlier crash or timeout")

        def lost(exc: WorkerLost) -> None:
            if "per-call limit" in str(exc):
                self.limit.record_hung(name, name, call_text.arguments())

        finish = (lambda reply: guard.write_back(reply, args, kwargs)) if guard.writes_into(name) else None
        flight = self.send(("call", remote._callee, name, args, kwargs, self._ctx()), call_text, lost=lost,
                           first=self.limit.first_call(name), finish=finish)
        return flight.result() if wait else flight

    def apply(self, fn, args: tuple, kwargs: dict, what: str, wait: bool = True):
        """``fn(*args, **kwargs)`` in the worker: harness code next to the target's objects (a
        build, ``target_ops.builds``, under the import limit); ``wait=False``: a ``Pending`` of it."""
        limit = dict(timeout=max(self.timeout, self.import_timeout), limit_name="--import-timeout") \
            if getattr(fn, "builds", False) else {}
        with self.limit.timed() if wait else contextlib.nullcontext():  # (the target's time, as guard.call counts it)
            flight = self.send(("apply", fn, args, kwargs, self._ctx()), what, harness_code=True, **limit)
            return flight.result() if wait else flight

    def seed_next(self, seed: int) -> None:
        """Seed torch's RNG in the worker (``target_ops.manual_seed``) before its next request."""
        self.next_seed = seed

    def _ctx(self) -> dict:
        seed, self.next_seed = self.next_seed, None
        return {"seed": seed, "grad": torch.is_grad_enabled()}

    def request(self, msg: tuple, what: str, timeout: float | None = None, kinds: bool = False,
                harness_code: bool = False, limit_name: str = "--impl-timeout"):
        """Send one request and wait for its reply, at most ``timeout`` (the per-call limit)."""
        return self.send(msg, what, timeout=timeout, kinds=kinds, harness_code=harness_code,
                         limit_name=limit_name).result()

    def send(self, msg: tuple, what: str, *, timeout: float | None = None, kinds: bool = False, first: bool = False,
             harness_code: bool = False, limit_name: str = "--impl-timeout", finish=None, lost=None) -> Pending:
        """Send one request; the returned ``Pending`` reads its reply (``finish(reply)``; ``lost(exc)``
        sees a ``WorkerLost``), at the latest before the next request is sent (one in flight).
        ``first``: a name's first call in this worker (``progress.Clock``'s import allowance)."""
        if self.in_flight is not None:
            self.in_flight.settle()
        if not self.alive():
            if self.generation == 0 or self.info is None:
                raise guard.ImplementationError(f"the worker of {self.spec!r} is not running")
            self._restart()
        release, self.garbage = self.garbage, []
        payload, gens = wire.dumps((msg[0], release, *msg[1:]))
        conn = self.conn
        clock = progress.Clock(self.timeout if timeout is None else timeout, imports=lambda v=self.imports: v.value,
                               allowance=self.import_timeout if first else 0.0)
        try:
            wire.send(conn, payload)
            sent = True
        except (BrokenPipeError, ConnectionResetError):
            sent = False

        def settle():
            if self.in_flight is flight:
                self.in_flight = None
            try:
                if self.conn is not conn:  # (closed before the reply was read)
                    raise WorkerLost(f"the worker of {self.spec!r} was stopped before {what} returned")
                try:
                    data = self._receive(clock, what, limit_name) if sent else None
                except (BrokenPipeError, EOFError, ConnectionResetError):
                    data = None
                if data is None:
                    self._lost(what, None, limit_name)
            except WorkerLost as exc:
                if lost is not None:
                    lost(exc)
                raise
            reply = self._unpack(wire.loads(data)[0], gens, what, kinds, harness_code)
            return reply if finish is None else finish(reply)

        flight = self.in_flight = Pending(settle)
        if gens:  # (generators' states come back with the reply: read it now)
            flight.settle()
        return flight

    def _receive(self, clock: progress.Clock, what: str, limit_name: str) -> wire.Message | None:
        if wire.spin(self.conn):  # most replies come within it: no sleep and wake-up
            return wire.receive(self.conn)
        clock.watch(lambda pid=self.process.pid: progress.process_cpu(pid))
        while True:
            why = clock.look()  # (None: under the limit, or computing past it)
            if why is not None:
                self._lost(what, clock.limit, limit_name, why)
            if self.conn.poll(min(clock.next_look(), progress.POLL_S)):
                data = wire.receive(self.conn)
                clock.report_slow(what, limit_name)
                return data
            if not self.alive() and not self.conn.poll(0):
                return None

    def _lost(self, what: str, limit: float | None, limit_name: str, why: str = ""):
        output = ""
        if self.output_path and os.path.exists(self.output_path):
            with open(self.output_path, "rb") as f:
                output = worker.read_capped(f.fileno())
        if limit is not None:
            self.kill()
            cause = (f"{what} did not return within the per-call limit of {limit:g} s "
                     f"({limit_name}); its worker process was killed" + (f": {why}" if why else ""))
        else:
            self.process.join(timeout=5)
            code = self.process.exitcode
            self.kill()
            cause = f"the worker process {worker.describe_exit(code)} during {what}"
        raise WorkerLost(cause + (f"\n  its last output:\n{worker.indent(output)}" if output.strip() else ""))

    def _unpack(self, reply, gens: list, what: str, kinds: bool, harness_code: bool):
        kind = reply[0]
        # ("ok", value, output, ...), ("raised", type, message, where, output, is_assertion),
        # (other kind, detail, output): see harness.boundary.worker
        output = reply[2] if kind == "ok" else reply[4] if kind == "raised" else reply[-1]
        if output:
            self._forward(output, what)
        if kind == "ok":
            for g, state in zip(gens, reply[3]):
                g.set_state(state)
            value = materialize(self, reply[1], what) if reply[4] else reply[1]  # (no Ref in it: as it is)
            return ("ok", value) if kinds else value
        if kind in ("missing", "broken") and kinds:
            return kind, reply[1]
        if kind == "broke a rule":  # (``guard.Inputs.violation``, judged in the worker)
            raise guard.ImplementationError(f"{what} {reply[1]}")
        _, type_name, message, where, _, is_assertion = reply
        if is_assertion and harness_code:  # the verdict of harness code run next to the target
            raise AssertionError(message)
        raise guard.ImplementationError(f"{what} raised {type_name}: {message}") from TargetRaised(
            type_name, message, where)

    def _forward(self, output: str, what: str) -> None:
        """The target's output (already capped per call) into this process's stderr, which
        pytest captures per test; past ``OUTPUT_BUDGET`` per test only the amount is counted."""
        if self.forwarded < OUTPUT_BUDGET:
            sys.stderr.write(f"[output of {self.spec} during {what}]\n{output}\n")
        else:
            self.withheld += len(output)
        self.forwarded += len(output)

    def output_report(self) -> str:
        """What was withheld since the last call (and reset): a line for the test's output."""
        line = (f"[{self.withheld:,} more characters of output of {self.spec} withheld "
                f"(at most {OUTPUT_BUDGET:,} are shown per test)]") if self.withheld else ""
        self.forwarded = self.withheld = 0
        return line


@atexit.register
def _close_all() -> None:
    for w in list(_LIVE):
        w.close()
