"""The target's process: imports the target and runs every call into it.

Started by ``harness.boundary.isolation`` (one persistent worker per target, forked from a clean
forkserver that preloaded torch; never from the harness's own process state). The harness
process never imports the target: it sends requests over a pipe and gets plain data back.
Whatever the target does to torch, to signals, to threads or to its own process stays here,
and the harness kills the whole process group on a timeout.

Requests (``wire``-pickled tuples) and what they return:
  ("load", spec, how, config sources)    -> TargetInfo (import under output capture; how: harness.boundary.interpret.mode;
                                            the sources: ``harness.spec.configs.add_source``)
  ("lookup", name)                       -> the attribute, exported (see ``export``)
  ("call", ref, name, args, kwargs, ctx) -> ref(*args, **kwargs), exported, under ``name``'s call
                                            rules (``harness.boundary.guard.Inputs``); for a name that may write
                                            into its arguments (``guard.writes_into``):
                                            (result, [(key, that argument after the call)]); ref may be
                                            (ref, attr): that object's method ``attr`` (``handles.method``)
  ("getattr", ref, attr) / ("setattr", ref, attr, value)
  ("apply", fn, args, kwargs, ctx)       -> fn(*args, **kwargs): harness code run next to the
                                            target's objects (fn is imported here by name)
Every request also carries the ids of the handles the harness dropped (freed here).
A reply is ("ok", value, output, generator states, whether value holds a Ref) or ("raised", type name, message,
traceback, output, is_assertion) or ("missing"/"broken"/"broke a rule", message, output).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import tempfile
import traceback
from typing import Any

import torch

from harness.spec import configs
from harness.boundary import guard, target_import, target_ops, wire
from harness.boundary.target_import import BrokenTarget, Missing, import_and_describe, lookup_attribute

_SCALARS = {bool, int, float, str}
#: the requests whose value is exported (``TargetServer.dumps``): plain data by value, other objects as Refs
_EXPORTED = {"lookup", "call", "apply", "getattr"}


_HARNESS_FILES = {__file__, target_import.__file__}


class TargetServer:
    """The worker's end of the pipe: holds the target's module and objects, serves requests."""

    def __init__(self, conn, generation: int, output_path: str):
        self.conn = conn
        self.generation = generation
        self.objects: dict[int, Any] = {}
        self.next_oid = 1
        self.module = None
        self.spec = "?"
        self.output_path = output_path
        self.output = _Output(output_path)

    # -- objects ---------------------------------------------------------------------------
    def export(self, obj: Any) -> Any:
        """Plain data by value (tensors detached); anything else stays here and goes as a Ref.
        Walked only for a value that is not all plain data (``dumps``)."""
        if isinstance(obj, torch.Tensor):
            return obj.detach()
        if type(obj) in (tuple, list):
            if all(type(o) in _SCALARS for o in obj):
                return obj  # a flat sequence of numbers (a token list): as it is
            return type(obj)(self.export(o) for o in obj)
        if type(obj) is dict and all(isinstance(k, (str, int)) for k in obj):
            return {wire.plain_scalar(k): self.export(v) for k, v in obj.items()}  # (an IntEnum key: its int)
        try:
            return wire.plain_scalar(obj)
        except wire.NotPlain:
            pass
        oid, self.next_oid = self.next_oid, self.next_oid + 1
        self.objects[oid] = obj
        cls = type(obj)
        return wire.Ref(oid, self.generation, f"{cls.__module__}.{cls.__qualname__}",
                        isinstance(obj, torch.nn.Module), callable(obj))

    def resolve(self, obj: Any) -> Any:
        if isinstance(obj, wire.Ref):
            if obj.generation != self.generation or obj.oid not in self.objects:
                raise LookupError(f"object {obj.type_name} no longer exists in the worker "
                                  f"(it was restarted after a crash or timeout)")
            return self.objects[obj.oid]
        if type(obj) in (tuple, list):
            return type(obj)(self.resolve(o) for o in obj)
        if type(obj) is dict:
            return {k: self.resolve(v) for k, v in obj.items()}
        return obj

    # -- requests --------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            try:
                wire.spin(self.conn)  # the next request usually follows soon: no sleep and wake-up
                data = wire.receive(self.conn)
            except (EOFError, OSError):
                return
            (op, release, *args), gens = wire.loads(data)
            for oid in release:
                self.objects.pop(oid, None)
            with self.output.request() as out:
                try:
                    reply = ("ok", getattr(self, "op_" + op)(*args), op in _EXPORTED)
                except _Reply as r:
                    reply = r.reply
                except BaseException as exc:  # noqa: BLE001 - whatever the target raises is a reply
                    reply = ("raised", type(exc).__name__, _message(exc), _where(exc), None,
                             isinstance(exc, AssertionError) and not getattr(exc, "from_target", False))
            reply = _with_output(reply, out.text(), [g.get_state() for g in gens])
            try:
                payload = self.dumps(reply)
            except Exception as exc:  # noqa: BLE001 - an unpicklable result
                payload, _ = wire.dumps(("raised", type(exc).__name__,
                                         f"its result could not be sent back to the harness: {exc}",
                                         "", reply[2] if reply[0] == "ok" else None, False))
            wire.send(self.conn, payload)

    def dumps(self, reply) -> wire.Message:
        """The reply's message; an exported value (``_EXPORTED``) goes by value where it is plain
        data (checked while it is pickled: the common case costs no walk here), else ``export``ed."""
        if reply[0] != "ok":
            return wire.dumps(reply)[0]
        if not reply[4]:
            return wire.dumps(reply[:4] + (False,))[0]
        try:
            return wire.dumps(reply[:4] + (False,), plain=True)[0]
        except wire.NotPlain:
            before = self.next_oid
            value = self.export(reply[1])
            return wire.dumps(("ok", value, reply[2], reply[3], self.next_oid != before))[0]

    def op_load(self, spec: str, how: str = "off", sources: tuple = ()):
        self.spec = spec
        for directory in sources:  # (the configuration types HARNESS_SIZES may name, imported when read)
            configs.register_source(directory)
        self.module, info = import_and_describe(spec, how)
        return info

    def op_lookup(self, name: str):
        try:
            return lookup_attribute(self.spec, self.module, name)
        except Missing as exc:
            raise _Reply(("missing", str(exc))) from None
        except BrokenTarget as exc:
            raise _Reply(("broken", str(exc))) from None

    def op_call(self, ref, name, args, kwargs, ctx):
        fn = getattr(self.resolve(ref[0]), ref[1]) if type(ref) is tuple else self.resolve(ref)
        return self._run(fn, self.resolve(args), self.resolve(kwargs), ctx, rules=name)

    def op_apply(self, fn, args, kwargs, ctx):
        return self._run(fn, self.resolve(args), self.resolve(kwargs), ctx, rules=None)

    def op_getattr(self, ref, attr: str):
        return getattr(self.resolve(ref), attr)

    def op_setattr(self, ref, attr: str, value):
        setattr(self.resolve(ref), attr, self.resolve(value))

    def _run(self, fn, args, kwargs, ctx, rules: str | None):
        """``fn(*args, **kwargs)``; a call into the target (``rules``: its protocol name or handle
        name) is judged by the call rules (``guard.Inputs``); harness code (None) is not."""
        if ctx.get("seed") is not None:
            target_ops.manual_seed(ctx["seed"])
        inputs = guard.Inputs(rules, args, kwargs) if rules is not None else None
        _imports.on = _imports.counter is not None  # (the imports of the call itself are counted)
        try:
            with torch.set_grad_enabled(ctx.get("grad", True)):
                result = fn(*args, **kwargs)
        finally:
            _imports.on = False
        if inputs is None:
            return result
        broken = inputs.violation(result)
        if broken:
            raise _Reply(("broke a rule", broken))
        if guard.writes_into(rules):  # the arguments it may write into go back, to be copied into the caller's
            return result, inputs.written()
        return result


class _Reply(Exception):
    def __init__(self, reply):
        super().__init__()
        self.reply = reply


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return f"<{type(exc).__name__} whose str() raised>"


def _where(exc: BaseException, frames: int = 4) -> str:
    """The target's innermost frames (file:line and code), without the harness's and the
    import machinery's; chained exceptions are left out."""
    stack = [f for f in traceback.extract_tb(exc.__traceback__)
             if not f.filename.startswith("<frozen") and f.filename not in _HARNESS_FILES]
    return "".join(traceback.format_list(stack[-frames:])).rstrip()


def _with_output(reply, output: str, gen_states):
    kind = reply[0]
    if kind == "ok":
        return ("ok", reply[1], output, gen_states, reply[2])
    if kind == "raised":
        return reply[:4] + (output,) + reply[5:]
    return reply + (output,)


class _Output:
    """The worker's fds 1 and 2, pointed at its scratch file (``path``) for its whole life; the
    output of one request is what was written during it. Per request this costs a few system
    calls (an ``lseek`` and an ``fstat`` per fd): the file is emptied only after a request that
    wrote, and fds 1 and 2 are pointed back at it only where the target moved or closed them."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        st = os.fstat(self.fd)
        self.file_id = st.st_dev, st.st_ino
        self._point()

    def _point(self) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        for fd in (1, 2):
            try:
                st = os.fstat(fd)
                ours = (st.st_dev, st.st_ino) == self.file_id
            except OSError:  # (closed by the target)
                ours = False
            if not ours:
                os.dup2(self.fd, fd)

    @contextlib.contextmanager
    def request(self):
        """Yields a ``_Captured`` whose text, after the request, is its output (capped)."""
        cap = _Captured()
        if os.lseek(self.fd, 0, os.SEEK_END):
            os.ftruncate(self.fd, 0)  # (O_APPEND: the next write starts the file again)
        self._point()
        try:
            yield cap
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            if os.lseek(self.fd, 0, os.SEEK_END):
                cap._text = read_capped(self.fd)


class _Captured:
    def __init__(self):
        self._text = ""

    def text(self) -> str:
        return self._text


def read_capped(fd: int, keep: int = wire.OUTPUT_KEEP) -> str:
    """The first and last ``keep`` bytes of what was written to ``fd``, and the count dropped."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return ""
    os.lseek(fd, 0, os.SEEK_SET)
    if size <= 2 * keep:
        return os.read(fd, size).decode(errors="replace")
    head = os.read(fd, keep).decode(errors="replace")
    os.lseek(fd, size - keep, os.SEEK_SET)
    tail = os.read(fd, keep).decode(errors="replace")
    return f"{head}\n[... {size - 2 * keep:,} bytes of output dropped ...]\n{tail}"


def _die_with_parent() -> None:
    """SIGKILL this worker when its parent (the forkserver, which exits with the harness) dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _ImportCounter:
    """First on ``sys.meta_path``: counts each module import begun while a call runs (``on``) into
    a shared counter the harness reads (``harness.boundary.progress``: a name's first call that imports
    modules gets the import allowance); finds nothing itself."""

    def __init__(self, counter):
        self.counter, self.on = counter, False

    def find_spec(self, name, path=None, target=None):  # noqa: ARG002
        if self.on:
            self.counter.value += 1


_imports = _ImportCounter(None)  # (``main`` gives it the harness's counter)


def main(conn, generation: int, threads: int | None, output_path: str, imports=None) -> None:
    """Entry point of the worker process (``imports``: a shared counter of the modules it imports)."""
    os.setpgrp()  # its own process group: a kill reaches whatever the target started
    _die_with_parent()
    if imports is not None:
        _imports.counter = imports
        sys.meta_path.insert(0, _imports)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the harness's to handle
    if threads:
        torch.set_num_threads(threads)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    TargetServer(conn, generation, output_path).serve()


def scratch_file() -> str:
    fd, path = tempfile.mkstemp(prefix="harness-worker-", suffix=".out")
    os.close(fd)
    return path


def describe_exit(code: int | None) -> str:
    """A worker process's exit code, as messages say it (``isolation``: "the worker process ...")."""
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"died with {signal.Signals(-code).name}"
        except ValueError:
            return f"died with signal {-code}"
    return f"exited with status {code} (os._exit or a native exit in the target)"


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())


def trimmed_traceback(where: str) -> str:
    return "  traceback (innermost last):\n" + indent(where)
