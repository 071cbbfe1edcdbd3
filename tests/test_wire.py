"""``harness.boundary.wire``: what crosses to a target's worker arrives as the same tensors (layout, dtype,
requires_grad, Parameter-ness), generators as their states, and large storages out of band (not
inside the pickle stream: before, tensors of 1 MiB and more went through torch's storage
pickling, ~150 MB/s, one copy of 17 MB per MLM call)."""
from __future__ import annotations

import multiprocessing as mp
import threading

import pytest
import torch

from harness.boundary import wire


def _through_socket(obj):
    """``obj`` sent and received over a real socket pair (the sender in a thread: a large message
    fills the socket's buffer before the receiver reads)."""
    message, gens = wire.dumps(obj)
    here, there = mp.Pipe()
    try:
        sender = threading.Thread(target=wire.send, args=(here, message))
        sender.start()
        got = wire.receive(there)
        sender.join()
        value, rebuilt = wire.loads(got)
    finally:
        here.close()
        there.close()
    return message, gens, value, rebuilt


LAYOUTS = {
    "transposed": lambda: torch.randn(3, 4).t(),
    "sliced view of a large storage": lambda: torch.randn(1000, 100)[::3, 5:],
    "expanded (stride 0)": lambda: torch.randn(5, 1).expand(5, 100_000),
    "empty": lambda: torch.zeros(0, 3),
    "requires grad, large": lambda: torch.randn(300, 300, requires_grad=True),
    "int64, 8 MB": lambda: torch.arange(1 << 20),
    "bool": lambda: torch.rand(70_000) > 0.5,
    "bfloat16": lambda: torch.randn(4, 8, dtype=torch.bfloat16),
    "complex": lambda: torch.randn(3, dtype=torch.complex64),
    "scalar": lambda: torch.tensor(2.5),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_tensor_arrives_with_its_layout_values_and_grad_flag(name):
    t = LAYOUTS[name]()
    _, _, back, _ = _through_socket({"t": t, "again": [t]})
    got = back["t"]
    assert (got.dtype, got.shape, got.stride(), got.storage_offset()) == \
        (t.dtype, t.shape, t.stride(), t.storage_offset())
    assert torch.equal(got.detach(), t.detach())
    assert got.requires_grad == t.requires_grad
    assert back["again"][0] is got  # (one object twice: one tensor twice)


def test_large_storages_go_out_of_band_into_fresh_aligned_tensor_memory():
    small, large = torch.randn(16), torch.randn(1 << 20)
    message, _, back, _ = _through_socket((small, large))
    assert len(message.buffers) == 1  # the large one only
    assert len(message.stream) < 2048  # its bytes are not in the pickle stream
    assert back[1].data_ptr() % 64 == 0  # (torch's own allocation)
    assert back[1].data_ptr() != large.data_ptr()  # a copy: no memory shared with the sender
    back[1].add_(1)  # writable
    assert torch.equal(back[1], large + 1) and torch.equal(back[0], small)


def test_parameters_keep_their_class_and_requires_grad():
    params = [torch.nn.Parameter(torch.randn(200, 200)), torch.nn.Parameter(torch.randn(3), requires_grad=False)]
    _, _, back, _ = _through_socket(params)
    for p, q in zip(params, back):
        assert type(q) is torch.nn.Parameter and q.requires_grad == p.requires_grad and torch.equal(p, q)


def test_a_generator_travels_as_its_state_and_is_recorded_on_both_sides():
    g = torch.Generator().manual_seed(3)
    torch.rand(5, generator=g)
    _, sent, back, rebuilt = _through_socket(("call", g))
    assert sent == [g] and rebuilt == [back[1]]
    assert torch.equal(back[1].get_state(), g.get_state())


def test_a_closed_sender_is_end_of_file_not_a_hang():
    here, there = mp.Pipe()
    message, _ = wire.dumps(torch.randn(1 << 18))
    here.close()
    with pytest.raises(EOFError):
        wire.receive(there)
    there.close()


def test_a_storage_outlives_its_last_reference_until_it_is_sent():
    """The buffers point into the storages' memory (no copy): the message keeps each storage alive,
    though nothing else refers to the tensor once ``dumps`` returned."""
    import gc
    message, _ = wire.dumps((torch.arange(300_000, dtype=torch.float32), torch.arange(100, dtype=torch.float32)))
    gc.collect()
    scribble = [torch.full((300_000,), -1.0) for _ in range(8)]  # (reuses freed memory, if any was freed)
    here, there = mp.Pipe()
    try:
        sender = threading.Thread(target=wire.send, args=(here, message))
        sender.start()
        (large, small), _ = wire.loads(wire.receive(there))
        sender.join()
    finally:
        here.close()
        there.close()
    assert torch.equal(large, torch.arange(300_000, dtype=torch.float32)) and scribble
    assert torch.equal(small, torch.arange(100, dtype=torch.float32))


@pytest.mark.parametrize("n", [6, 1 << 17 | 2])
def test_a_view_of_another_dtypes_storage_whose_bytes_do_not_divide(n):
    raw = torch.arange(n, dtype=torch.uint8)
    t = raw[:4].view(torch.float32)  # (a float32 view of a storage of n bytes, n % 4 == 2)
    _, _, back, _ = _through_socket(t)
    assert back.dtype == torch.float32 and torch.equal(back.view(torch.uint8), raw[:4])


# -- a worker's reply: plain data by value, checked inside pickle's own walk -----------------
def _server():
    from harness.boundary.worker import TargetServer
    server = TargetServer.__new__(TargetServer)  # (no pipe, no output capture: only its objects)
    server.objects, server.next_oid, server.generation = {}, 1, 1
    return server


def _reply_value(server, value):
    """What the harness reads of a call that returned ``value``, and whether it holds a Ref."""
    reply, _ = wire.loads(server.dumps(("ok", value, "", [], True)))
    return reply[1], reply[4]


PLAIN_REPLIES = {
    "token pairs": lambda: [([7, 8], [9], 0), ([1], [2, 3], 1)] * 3,
    "tensors, one requiring grad": lambda: (torch.ones(3, requires_grad=True) * 2, [torch.zeros(2)]),
    "a Parameter in a dict": lambda: {"w": torch.nn.Parameter(torch.ones(2))},
    "numbers and torch's plain types": lambda: [1 + 2j, torch.Size([2, 3]), torch.float16, torch.device("cpu"),
                                                range(3), slice(1, 2), ..., None, b"x", "s", 1.5, True],
    "a dict with tuple keys, a set": lambda: ({(1, 2): 3}, {4, 5}),
}


@pytest.mark.parametrize("name", sorted(PLAIN_REPLIES))
def test_a_plain_reply_goes_by_value_without_the_export_walk(name, monkeypatch):
    """The harness reads what the target returned (tensors detached, Parameters as tensors), and
    the worker never walked it in Python: a reply of 100,000 NSP pairs took 430 ms to walk and
    15 ms to pickle (``TargetServer.export`` runs only where something must stay in the worker)."""
    server = _server()
    value = PLAIN_REPLIES[name]()
    monkeypatch.setattr(server, "export", lambda obj: pytest.fail("a plain reply was walked by export"))
    got, holds_ref = _reply_value(server, value)
    assert not holds_ref and not server.objects
    for a, b in zip(torch.utils._pytree.tree_leaves(value), torch.utils._pytree.tree_leaves(got)):
        if isinstance(a, torch.Tensor):
            assert type(b) is torch.Tensor and not b.requires_grad and torch.equal(a.detach(), b)
        else:
            assert a == b and type(a) is type(b)
    assert type(got) is type(value) and len(got) == len(value)


def test_a_shared_list_arrives_shared_as_in_process():
    server = _server()
    sentence = [1, 2, 3]
    got, _ = _reply_value(server, [(sentence, sentence, 0)])
    assert got[0][0] is got[0][1] and got[0][0] == sentence


@pytest.mark.parametrize("make", [lambda: torch.nn.Linear(2, 2), torch.Generator, lambda: print,
                                  lambda: ([1, 2], {"m": torch.nn.ReLU()})],
                         ids=["module", "generator", "function", "module nested in plain data"])
def test_an_object_that_is_not_plain_data_stays_in_the_worker_as_a_ref(make):
    server = _server()
    value = make()
    got, holds_ref = _reply_value(server, value)
    refs = [x for x in torch.utils._pytree.tree_leaves(got) if isinstance(x, wire.Ref)]
    assert holds_ref and len(refs) == 1 and len(server.objects) == 1
    assert server.objects[refs[0].oid] is next(x for x in torch.utils._pytree.tree_leaves(value)
                                               if not isinstance(x, (int, list)))


def test_the_plain_pickler_refuses_what_is_not_plain():
    with pytest.raises(wire.NotPlain, match="Linear"):
        wire.dumps([1, (2, torch.nn.Linear(1, 1))], plain=True)


def _target_only_values():
    """Subclasses of plain scalar types from a module only the worker has (a target's file)."""
    import enum
    import types
    module = types.ModuleType("a_target_file_the_harness_never_imports")
    Color = enum.IntEnum("Color", "RED GREEN", module=module.__name__)
    module.Color = Color
    for base in (str, float, bytes, complex):
        cls = type(f"My{base.__name__}", (base,), {"__module__": module.__name__, "__str__": lambda self: "?"})
        setattr(module, cls.__name__, cls)
    values = [Color.GREEN, module.Mystr("tok"), module.Myfloat(0.5), module.Mybytes(b"ab"), module.Mycomplex(1j)]
    return module, values, [2, "tok", 0.5, b"ab", 1j]


@pytest.mark.parametrize("with_a_ref", [False, True], ids=["plain reply", "reply walked by export"])
def test_a_subclass_of_a_plain_scalar_crosses_as_its_base_value_not_by_its_class(with_a_ref, monkeypatch):
    """An IntEnum or a str subclass a target returns arrives as the int or str it is: pickled as
    itself it names its class, and unpickling it would import the target's module into the
    harness's process (here: fail, as the module exists only on the worker's side)."""
    import sys
    module, values, expected = _target_only_values()
    server = _server()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    keyed = {values[0]: values}  # (an IntEnum key too)
    message = server.dumps(("ok", [keyed, torch.nn.ReLU()] if with_a_ref else keyed, "", [], True))
    monkeypatch.delitem(sys.modules, module.__name__)
    reply, _ = wire.loads(message)
    got = reply[1][0] if with_a_ref else reply[1]
    assert [type(k) for k in got] == [int] and got[2] == expected
    assert [type(x) for x in got[2]] == [type(x) for x in expected]
    assert reply[4] is with_a_ref
