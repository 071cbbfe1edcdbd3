"""Handles to a worker's objects (harness/boundary/handles.py): what crosses to the worker and what does
not. A module's ``.to`` is one request (``handles.method`` / ``runner.move``), and Hypothesis's
pretty printer, which prints every example's arguments, never asks the worker anything (it used
to ask each handle for ``_repr_pretty_``: 1 in 10 requests of a conformance run)."""
from __future__ import annotations

import textwrap

import pytest
import torch
from hypothesis.vendor.pretty import pretty

from harness import runner
from harness.boundary import guard, handles
from tests.planted_support import source_target

SOURCE = textwrap.dedent('''
    import torch

    class Scale(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * self.weight

    class NotAModule:
        def to(self, **kw):
            return "moved"
''')


@pytest.fixture(params=["process", "none"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "handles_target", SOURCE, request.param)


def counted(tgt, monkeypatch) -> list:
    """The ops of the requests ``tgt``'s worker gets from now on."""
    sent = []
    original = type(tgt.backend).send  # (every request goes through it)

    def send(self, msg, what, **kwargs):
        sent.append(msg[0])
        return original(self, msg, what, **kwargs)

    monkeypatch.setattr(type(tgt.backend), "send", send)
    return sent


def test_move_is_one_request_and_returns_the_moved_module(tgt, monkeypatch):
    mod = runner.impl(tgt, "Scale")(3)
    sent = counted(tgt, monkeypatch) if tgt.isolated else []
    moved = runner.move(tgt, mod, "Scale", dtype=torch.float64)
    assert handles.is_module(moved)
    if tgt.isolated:
        assert sent == ["call"], sent
    y = guard.call(tgt.limit, moved, "Scale.forward", torch.ones(3, dtype=torch.float64))
    assert y.dtype == torch.float64 and torch.equal(y, torch.ones(3, dtype=torch.float64))


def test_move_keeps_the_object_when_to_returns_something_else(tgt):
    obj = runner.impl(tgt, "NotAModule")()
    assert runner.move(tgt, obj, "NotAModule", device="cpu") is obj


def test_a_missing_method_is_the_call_error_naming_it(tgt):
    obj = runner.impl(tgt, "Scale")(2)
    with pytest.raises(guard.ImplementationError, match=r"Scale\.half_precision\(.*\) raised AttributeError"):
        guard.call(tgt.limit, handles.method(obj, "half_precision"), "Scale.half_precision")


def test_a_method_handle_is_not_a_module_and_keeps_its_owner_alive(tmp_path):
    for tgt in source_target(tmp_path, "handles_target", SOURCE, "process"):
        mod = runner.impl(tgt, "Scale")(2)
        to = handles.method(mod, "to")
        assert handles.is_remote(to) and not handles.is_module(to)
        assert "method to of" in repr(to)
        with pytest.raises(TypeError, match="method handle"):
            runner.on_target(tgt, id, to)  # sending it to the worker: refused, not a wrong object
        del mod  # the method handle holds its owner: the worker keeps the object
        assert tgt.backend.garbage == []
        moved = guard.call(tgt.limit, to, "Scale.to", dtype=torch.float64)
        assert handles.is_module(moved)


def test_pretty_printing_a_handle_or_a_target_asks_the_worker_nothing(tgt, monkeypatch):
    mod = runner.impl(tgt, "Scale")(2)
    sent = counted(tgt, monkeypatch) if tgt.isolated else []
    tgt.measured["suite.key"] = torch.zeros(1000)  # a walk through the fields would print this
    text = pretty({"target": tgt, "module": mod, "modules": [mod, mod]})
    assert sent == [], sent
    assert "Target(" in text and "zeros" not in text and "tensor(" not in text  # (a module name may hold "0.")
