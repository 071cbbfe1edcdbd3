"""What crosses the boundary between the harness and a target's worker process.

Messages are pickled (an in-memory pipe between two processes of this harness, never a stored
file; results and baselines are JSON/CSV/Parquet). Tensors travel with their layout, as the
bytes of their storage plus offset, size and stride, so a transposed, sliced or stride-0
expanded view arrives as the same view:

- a small storage (< ``OUT_OF_BAND_BYTES``) inside the pickle stream;
- a larger one out of band (pickle protocol 5): written to the socket from the tensor's own
  memory and read from it straight into a fresh tensor's memory, with no copy into or out of
  the pickle stream;
- a CUDA tensor is staged through the CPU and rebuilt on its device (CUDA IPC handles, or shared
  memory, would tie the two processes' memory together, and a worker killed mid-call must not
  take the harness's memory with it).

A ``torch.Generator`` travels as its state and comes back as its state after the call, so the
harness's generator advances exactly as it would in-process. Objects the worker keeps (modules,
functions, anything that is not plain data) travel as a ``Ref`` token.
"""
from __future__ import annotations

import ctypes
import io
import os
import pickle
import select
import struct
import time
from dataclasses import dataclass, field

import torch

#: a tensor storage at least this large (bytes) travels out of band (``send``/``receive``)
OUT_OF_BAND_BYTES = 64 * 1024
#: a call's captured output is cut to its first and last KiB
OUTPUT_KEEP = 1024


@dataclass(frozen=True)
class Ref:
    """A handle to an object that lives in the worker: ``oid`` in its table, from worker
    ``generation`` (a restarted worker has lost it), with a description for messages."""
    oid: int
    generation: int
    type_name: str
    is_module: bool
    is_callable: bool


def _rebuild(data, dtype: torch.dtype, offset: int, size, stride, requires_grad: bool,
             device: str) -> torch.Tensor:
    """A tensor from its storage's bytes: a uint8 tensor (out of band: ``receive`` read the bytes
    into it), a ``bytearray`` (in band), or ``b""`` (an empty storage)."""
    if isinstance(data, torch.Tensor):
        base = data[:len(data) - len(data) % dtype.itemsize].view(dtype)
    elif len(data) >= dtype.itemsize:
        base = torch.frombuffer(data if isinstance(data, bytearray) else bytearray(data), dtype=dtype,
                                count=len(data) // dtype.itemsize)
    else:
        base = torch.empty(0, dtype=dtype)
    t = base.as_strided(size, stride, offset)
    if device != "cpu":
        t = _restrided(t, device)
    return t.requires_grad_(requires_grad) if requires_grad and t.is_floating_point() else t


def _restrided(t: torch.Tensor, device: str) -> torch.Tensor:
    """``t`` on ``device`` with the same strides (a plain ``.to`` would make it contiguous).

    It copies the storage span the view covers and views the copy the same way, so stride-0
    (expanded) and overlapping views keep their strides: ``empty_strided(...).copy_(t)`` refuses
    to write such a layout (found by the first CUDA run: MQA K/V expanded over heads)."""
    if t.numel() == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)
    span = 1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))
    flat = t.as_strided((span,), (1,), t.storage_offset()).to(device, copy=True)
    return flat.as_strided(t.size(), t.stride(), 0)


def _storage_bytes(t: torch.Tensor) -> pickle.PickleBuffer | bytes:
    """The storage's bytes as a writable buffer over its memory (a ctypes array that holds the
    storage alive): in band, protocol 5 copies it into the message once and the receiver gets a
    ``bytearray`` that ``_rebuild`` views without another copy; out of band (``Pickler``), the
    receiver gets the fresh memory ``receive`` read it into."""
    s = t.untyped_storage()
    n = s.nbytes()
    if not n:
        return b""
    memory = (ctypes.c_char * n).from_address(s.data_ptr())
    memory.storage = s  # (the array does not own the memory: the storage must outlive it)
    return pickle.PickleBuffer(memory)


def reduce_tensor(t: torch.Tensor):
    if t.is_cpu:
        cpu, device = t, "cpu"
    else:
        cpu, device = _cpu_copy_same_strides(t.detach()), str(t.device)
    return (_rebuild, (_storage_bytes(cpu), cpu.dtype, cpu.storage_offset(), tuple(cpu.size()),
                       tuple(cpu.stride()), t.requires_grad, device))


def _cpu_copy_same_strides(t: torch.Tensor) -> torch.Tensor:
    if t.is_contiguous() or t.numel() == 0:
        return t.cpu()
    return _restrided(t, "cpu")


def _rebuild_generator(device: str, state: torch.Tensor) -> torch.Generator:
    """A generator from its state. ``Unpickler`` rebuilds them itself, to record each; this one
    stands for the reduce function's name in a message."""
    g = torch.Generator(device=device)
    g.set_state(state)
    return g


def _as_parameter(t: torch.Tensor, requires_grad: bool = True) -> torch.nn.Parameter:
    return torch.nn.Parameter(t, requires_grad=requires_grad)


#: how long each side of the pipe watches for the other's next message before it sleeps: the
#: harness for a reply, the worker for the next request. A sleeping process's wake-up costs
#: 0.1-1 ms on a 2-core VM, more than most calls take: with 0.5 ms a conformance run of the
#: reference spent 4-5 s of its ~47 s in wake-ups, with 5 ms it did not. The watch yields the
#: core at every turn (``spin``), so on a busy machine the other processes run. $HARNESS_SPIN_S sets
#: it: ``check --jobs N`` sets 0 where the N harness processes and their N target workers outnumber
#: the cores (there the watch took cores the others needed: 2 workers on 2 cores ran ~10 % slower)
SPIN_S = float(os.environ.get("HARNESS_SPIN_S", "0.005"))


def spin(conn, seconds: float = SPIN_S) -> bool:
    """Whether a message arrived on ``conn`` within ``seconds``, watched without sleeping (a
    bare ``poll`` per turn, the core yielded between turns)."""
    watch = select.poll()
    watch.register(conn.fileno(), select.POLLIN)
    end = time.perf_counter() + seconds
    while not watch.poll(0):
        if time.perf_counter() >= end:
            return False
        os.sched_yield()
    return True


#: plain data: what a worker's reply carries by value (``harness.boundary.worker.TargetServer.export``),
#: with tensors (detached) and the containers pickle writes itself (tuple, list, dict, set, ...)
PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size,
         range, slice, type(Ellipsis))
#: how a subclass of a plain scalar type (an IntEnum, numpy.float64, a str enum) crosses: as its
#: base type's value. Pickled as itself it would name its class, and the harness would import the
#: module that defines it: the target's code, in the harness's process.
_SCALAR_BASES = ((int, int.__int__), (float, float.__float__), (complex, complex.__complex__),
                 (str, str.__str__), (bytes, bytes.__bytes__))


class NotPlain(Exception):
    """A message for ``Pickler(plain=True)`` holds an object that is not plain data."""


def plain_scalar(obj):
    """``obj`` as its exact plain type: itself for a ``PLAIN`` type, its base type's value for a
    subclass of a scalar one (``NotPlain`` otherwise)."""
    if type(obj) in PLAIN:
        return obj
    for base, value in _SCALAR_BASES:
        if isinstance(obj, base):
            return value(obj)  # (the base type's own method: exact, whatever the subclass overrides)
    raise NotPlain(type(obj).__qualname__)


class Pickler(pickle.Pickler):
    """Tensors by layout (``reduce_tensor``; large storages out of band, into ``buffers``);
    generators by state (recorded in ``generators``, in the order the receiver rebuilds them).

    ``plain``: the message must be plain data (``PLAIN``, tensors, and the containers pickle
    writes itself); tensors go detached, and anything else raises ``NotPlain``. The check runs
    inside pickle's own walk, which visits a list of numbers or a tuple at C speed: a worker's
    reply of 100,000 token pairs is checked and written in 15 ms (its Python walk took 430 ms)."""

    def __init__(self, file, plain: bool = False):
        self.buffers: list[pickle.PickleBuffer] = []
        super().__init__(file, protocol=5, buffer_callback=self._out_of_band)
        self.generators: list[torch.Generator] = []
        self.plain = plain

    def _out_of_band(self, buf: pickle.PickleBuffer) -> bool:
        """False (out of band, kept in ``buffers``) for a large buffer; True (in band) otherwise."""
        if buf.raw().nbytes < OUT_OF_BAND_BYTES:
            return True
        self.buffers.append(buf)
        return False

    def reducer_override(self, obj):
        cls = type(obj)  # (exact types first: this runs for every object in a message)
        if self.plain:
            return self._plain(obj)
        if cls is torch.Tensor:
            return reduce_tensor(obj)
        if cls is torch.Generator:
            self.generators.append(obj)
            return (_rebuild_generator, (str(obj.device), obj.get_state()))
        if not isinstance(obj, torch.Tensor):
            return NotImplemented
        if isinstance(obj, torch.nn.Parameter):
            return (_as_parameter, (obj.detach(), obj.requires_grad))
        return reduce_tensor(obj)

    def _plain(self, obj):
        if isinstance(obj, torch.Tensor):
            return reduce_tensor(obj.detach())
        if type(obj) in PLAIN or id(obj) in _REDUCERS:
            return NotImplemented  # (pickled as pickle does; the types and functions their reductions name)
        value = plain_scalar(obj)  # (raises NotPlain)
        return type(value), (value,)


@dataclass
class Message:
    """A pickled message: its pickle stream and its out-of-band buffers (``send`` writes both)."""
    stream: bytes
    buffers: list = field(default_factory=list)  # PickleBuffers (sent), uint8 tensors (received)


def dumps(obj, plain: bool = False) -> tuple[Message, list[torch.Generator]]:
    """The message, and the generators in it (whose states the reply brings back); ``plain``: see
    ``Pickler`` (raises ``NotPlain``)."""
    buf = io.BytesIO()
    pickler = Pickler(buf, plain=plain)
    pickler.dump(obj)
    return Message(buf.getvalue(), pickler.buffers), pickler.generators


#: the callables that reductions of plain data name (``Pickler._plain`` lets them through)
_REDUCERS = {id(f) for f in (_rebuild, *PLAIN)}


class Unpickler(pickle.Unpickler):
    """Rebuilds a message; the generators in it are recorded in ``generators``, in the order the
    sender sent them (their states go back with the reply)."""

    def __init__(self, file, buffers=()):
        super().__init__(file, buffers=buffers)
        self.generators: list[torch.Generator] = []

    def find_class(self, module: str, name: str):
        if module == __name__ and name == _rebuild_generator.__name__:
            return self._rebuild_generator
        return super().find_class(module, name)

    def _rebuild_generator(self, device: str, state: torch.Tensor) -> torch.Generator:
        g = _rebuild_generator(device, state)
        self.generators.append(g)
        return g


def loads(message: Message) -> tuple[object, list[torch.Generator]]:
    """The message, and the generators rebuilt from it (in the sender's order)."""
    unpickler = Unpickler(io.BytesIO(message.stream), message.buffers)
    return unpickler.load(), unpickler.generators


# -- framing -------------------------------------------------------------------------------
# One message on the socket: a prefix (the stream's length, the number of buffers), each
# buffer's length, the pickle stream, then the buffers' bytes. Written with ``writev`` from the
# objects' own memory; each buffer read into a fresh tensor's memory.
_PREFIX = struct.Struct("<IQ")


def send(conn, message: Message) -> None:
    """Write ``message`` to ``conn``'s socket (blocking until it is all written)."""
    sizes = [b.raw().nbytes for b in message.buffers]
    parts = [memoryview(_PREFIX.pack(len(sizes), len(message.stream)) + struct.pack(f"<{len(sizes)}Q", *sizes)),
             memoryview(message.stream), *(b.raw() for b in message.buffers)]
    fd = conn.fileno()
    while parts:
        written = os.writev(fd, parts[:512])
        while parts and written >= parts[0].nbytes:
            written -= parts[0].nbytes
            parts.pop(0)
        if written:
            parts[0] = parts[0][written:]


def receive(conn) -> Message:
    """Read one message from ``conn``'s socket (EOFError when the other end is gone); each
    out-of-band buffer lands in the memory of a fresh uint8 tensor, which its tensor views."""
    fd = conn.fileno()
    n_buffers, stream_len = _PREFIX.unpack(_read_exactly(fd, bytearray(_PREFIX.size)))
    sizes = struct.unpack(f"<{n_buffers}Q", _read_exactly(fd, bytearray(8 * n_buffers))) if n_buffers else ()
    stream = _read_exactly(fd, bytearray(stream_len))
    buffers = []
    for n in sizes:
        memory = torch.empty(n, dtype=torch.uint8)
        _read_exactly(fd, memory.numpy())
        buffers.append(memory)
    return Message(stream, buffers)


def _read_exactly(fd: int, into):
    view, got = memoryview(into).cast("B"), 0
    while got < len(view):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise EOFError("the other end of the pipe closed it")
        got += n
    return into
