"""What crosses the boundary between the harness and a target's worker process.

Messages are pickled (an in-memory pipe between two processes of this harness, never a stored
file; results and baselines are JSON/CSV/Parquet). Tensors travel with their layout:

- a small tensor (< ``SHM_BYTES``) as the bytes of its storage plus offset, size and stride, so
  a transposed, sliced or stride-0 expanded view arrives as the same view;
- a large CPU tensor through shared memory (``torch.multiprocessing``'s reduction: no copy);
- a CUDA tensor is staged through the CPU and rebuilt on its device (CUDA IPC handles would
  tie the two processes' lifetimes together, and a worker killed mid-call must not take the
  harness's memory with it).

A ``torch.Generator`` travels as its state and comes back as its state after the call, so the
harness's generator advances exactly as it would in-process. Objects the worker keeps (modules,
functions, anything that is not plain data) travel as a ``Ref`` token.
"""
from __future__ import annotations

import io
import os
import pickle
import select
import time
from dataclasses import dataclass

import torch

#: tensors at least this large (bytes of storage) go through shared memory
SHM_BYTES = 1 << 20
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


def _rebuild_small(data: bytearray, dtype: torch.dtype, offset: int, size, stride, requires_grad: bool,
                   device: str) -> torch.Tensor:
    if data and not isinstance(data, bytearray):
        data = bytearray(data)  # (frombuffer needs a writable buffer)
    storage = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    base = storage.view(dtype) if data else torch.empty(0, dtype=dtype)
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
    """The storage's bytes as a writable buffer: protocol 5 copies it into the message once and the
    receiver gets a ``bytearray`` that ``_rebuild_small`` views without another copy."""
    s = t.untyped_storage()
    if not s.nbytes():
        return b""
    return pickle.PickleBuffer(torch.empty(0, dtype=torch.uint8).set_(s).numpy())


def reduce_tensor(t: torch.Tensor):
    cpu = t.detach()
    device = str(t.device)
    if t.device.type != "cpu":
        cpu = _cpu_copy_same_strides(cpu)
    if cpu.untyped_storage().nbytes() >= SHM_BYTES and device == "cpu" and not t.requires_grad:
        from torch.multiprocessing.reductions import reduce_tensor as shm_reduce
        return shm_reduce(cpu)
    return (_rebuild_small, (_storage_bytes(cpu), cpu.dtype, cpu.storage_offset(), tuple(cpu.size()),
                             tuple(cpu.stride()), bool(t.requires_grad), device))


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


def _as_parameter(t: torch.Tensor) -> torch.nn.Parameter:
    return torch.nn.Parameter(t, requires_grad=t.requires_grad)


#: how long each side of the pipe watches for the other's next message before it sleeps: the
#: harness for a reply, the worker for the next request. A sleeping process's wake-up costs
#: 0.1-1 ms on a 2-core VM, more than most calls take: with 0.5 ms a conformance run of the
#: reference spent 4-5 s of its ~47 s in wake-ups, with 5 ms it did not. The watch yields the
#: core at every turn (``spin``), so on a busy machine the other processes run.
SPIN_S = 0.005


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


class Pickler(pickle.Pickler):
    """Tensors by layout (small) or shared memory (large); generators by state (recorded in
    ``generators``, in the order the receiver rebuilds them)."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.generators: list[torch.Generator] = []

    def reducer_override(self, obj):
        if isinstance(obj, torch.nn.Parameter):
            return (_as_parameter, (obj.detach(),))
        if isinstance(obj, torch.Tensor):
            return reduce_tensor(obj)
        if isinstance(obj, torch.Generator):
            self.generators.append(obj)
            return (_rebuild_generator, (str(obj.device), obj.get_state()))
        return NotImplemented


def dumps(obj) -> tuple[bytes, list[torch.Generator]]:
    """The message's bytes, and the generators in it (whose states the reply brings back)."""
    buf = io.BytesIO()
    pickler = Pickler(buf)
    pickler.dump(obj)
    return buf.getvalue(), pickler.generators


class Unpickler(pickle.Unpickler):
    """Rebuilds a message; the generators in it are recorded in ``generators``, in the order the
    sender sent them (their states go back with the reply)."""

    def __init__(self, file):
        super().__init__(file)
        self.generators: list[torch.Generator] = []

    def find_class(self, module: str, name: str):
        if module == __name__ and name == _rebuild_generator.__name__:
            return self._rebuild_generator
        return super().find_class(module, name)

    def _rebuild_generator(self, device: str, state: torch.Tensor) -> torch.Generator:
        g = _rebuild_generator(device, state)
        self.generators.append(g)
        return g


def loads(data: bytes) -> tuple[object, list[torch.Generator]]:
    """The message, and the generators rebuilt from it (in the sender's order)."""
    unpickler = Unpickler(io.BytesIO(data))
    return unpickler.load(), unpickler.generators
