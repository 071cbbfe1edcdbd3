"""The fast paths of the target boundary: ``runner.call_each`` (a statistical property's loop of
calls in few requests), plain results that skip the handle walk, fixed-grid inputs verified once
per target, and ``target_ops.manual_seed``. Each must give what the slow path gives."""
from __future__ import annotations

import textwrap

import pytest
import torch

from harness import runner
from harness.boundary import target_ops
from harness.boundary.loader import load_target
from tests.planted_support import source_target

DRAWS = textwrap.dedent('''
    import torch

    calls = 0

    def draw(x, *, scale=1, generator=None):
        global calls
        calls += 1
        return x + scale * torch.rand(x.shape, generator=generator)

    def pairs(n):
        return [([1, 2], [3, 4, 5], 0) for _ in range(n)]

    def module_and_ints():
        return [torch.nn.Linear(2, 2), 3]

    def fails_at(x, *, stop, generator=None):
        if int(x) == stop:
            raise ValueError(f"bad input {int(x)}")
        return x
''')


@pytest.fixture(params=["process", "none"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "draws", DRAWS, request.param, timeout=30)


def test_call_each_equals_one_call_at_a_time(tgt):
    xs = [(torch.full((3,), float(i)),) for i in range(40)]
    g = torch.Generator().manual_seed(5)
    batched = runner.call_each(tgt, "draw", xs, {"scale": 2, "generator": g})
    g2 = torch.Generator().manual_seed(5)
    one = [runner.impl(tgt, "draw")(*x, scale=2, generator=g2) for x in xs]
    assert len(batched) == 40
    for a, b in zip(batched, one):
        assert torch.equal(a, b)  # the same generator was drawn on by every call, in order
    assert torch.equal(g.get_state(), g2.get_state())  # ... and came back advanced as in-process
    later = runner.call_each(tgt, "draw", xs[:1], {"generator": g})[0]
    assert not torch.equal(later - xs[0][0], batched[0] - xs[0][0])


def test_call_each_names_the_call_that_raised(tgt):
    xs = [(torch.tensor(i),) for i in range(30)]
    with pytest.raises(AssertionError) as err:  # ImplementationError is an AssertionError
        runner.call_each(tgt, "fails_at", xs, {"stop": 17})
    assert "bad input 17" in str(err.value)
    assert "ValueError" in str(err.value)


def test_call_each_batches_requests_when_isolated(tgt):
    if tgt.worker is None:
        pytest.skip("in-process: no requests")
    sent = []
    request = tgt.worker.request

    def counting(msg, *a, **k):
        sent.append(msg[0])
        return request(msg, *a, **k)

    tgt.worker.request = counting
    runner.call_each(tgt, "draw", [(torch.zeros(2),)] * 500, {})
    assert 1 <= len(sent) <= 25, sent  # 500 calls, grown batches: far fewer requests than calls


def test_plain_results_and_handles_come_back_as_before(tgt):
    pairs = runner.impl(tgt, "pairs")(1000)
    assert pairs == [([1, 2], [3, 4, 5], 0)] * 1000
    assert type(pairs[0]) is tuple and type(pairs[0][0]) is list
    mod, n = runner.impl(tgt, "module_and_ints")()
    assert n == 3
    assert tuple(runner.on_target(tgt, target_ops.attribute_tensor, mod, "weight").shape) == (2, 2)


def test_a_fixed_grid_is_verified_once_per_target_but_failures_are_not_recorded(tgt):
    assert runner.unverified(tgt, "p", [1, 2, 3]) == [1, 2, 3]
    runner.verified(tgt, "p", 2)
    assert runner.unverified(tgt, "p", [1, 2, 3]) == [1, 3]
    assert runner.unverified(tgt, "other", [2]) == [2]  # per property
    other = load_target("reference", isolation="none")
    assert runner.unverified(other, "p", [2]) == [2]  # per target object


def test_manual_seed_seeds_the_global_generator_like_torch():
    target_ops.manual_seed(123)
    a = torch.rand(4)
    torch.manual_seed(123)
    assert torch.equal(a, torch.rand(4))


def test_manual_seed_queues_no_lazy_device_calls():
    import torch.cuda
    if torch.cuda.is_available():
        pytest.skip("CUDA present: its seeding is real work, not a queued call")
    before = len(getattr(torch.cuda, "_queued_calls", []))
    for i in range(20):
        target_ops.manual_seed(i)
    assert len(getattr(torch.cuda, "_queued_calls", [])) == before
