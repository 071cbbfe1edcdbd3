"""Calls read later (harness/boundary/pending.py, ``runner.submit``): in a worker the target computes while
the harness computes its reference, and a property reads the same result, the same errors and
the same call-rule verdicts as when it waits (in-process the call has already run). No timing
is asserted: that the call runs before ``result()`` is shown by what it writes."""
from __future__ import annotations

import textwrap
import time

import pytest
import torch

from harness import runner
from harness.boundary import guard
from harness.boundary.pending import Pending, resolved
from tests.planted_support import source_target

SOURCE = textwrap.dedent('''
    import os, time
    import torch

    def double(x):
        return 2 * x

    def announce(path, x):
        open(path, "w").write("called")
        return x + 1

    def fails(x):
        raise ValueError("tile 7 overflowed")

    def scale_(x):
        x.mul_(3)  # writes into an input it may not write into
        return x.clone()

    def sleeps(x, seconds):
        time.sleep(seconds)
        return x

    def draws(g):
        return torch.rand(3, generator=g)
''')


@pytest.fixture(params=["process", "none"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "pending_target", SOURCE, request.param, timeout=2)


def test_pending_keeps_a_value_or_an_error_and_chains():
    assert Pending.now(lambda a, b: a + b, 1, 2).result() == 3
    assert Pending.now(int, "5").then(lambda v: v * 2).result() == 10
    failed = Pending.now(int, "five")
    assert failed.done
    for _ in range(2):  # (raised again at every read)
        with pytest.raises(ValueError, match="five"):
            failed.result()
    assert resolved(7) == 7 and resolved(Pending.now(lambda: 7)) == 7


def test_a_submitted_call_runs_before_its_result_is_read(tgt, tmp_path):
    marker = tmp_path / "called.txt"
    pending = runner.submit(tgt, "announce", str(marker), torch.ones(2))
    deadline = time.monotonic() + 60
    while not marker.exists():  # the harness goes on; the target's call happens meanwhile
        assert time.monotonic() < deadline, "the submitted call did not run"
        time.sleep(0.01)
    assert torch.equal(pending.result(), torch.full((2,), 2.0))


def test_the_error_is_raised_by_result_not_by_submit(tgt):
    pending = runner.submit(tgt, "fails", torch.ones(2))
    with pytest.raises(guard.ImplementationError, match=r"fails\(.*\) raised ValueError: tile 7 overflowed"):
        pending.result()


def test_the_call_rules_hold_for_a_submitted_call(tgt):
    pending = runner.submit(tgt, "scale_", torch.ones(2))
    with pytest.raises(guard.ImplementationError, match=r"modified its input in place \(argument 0\)"):
        pending.result()


def test_the_next_request_settles_the_one_in_flight(tgt):
    first = runner.submit(tgt, "double", torch.ones(2))
    second = runner.impl(tgt, "double")(torch.full((2,), 5.0))  # sent after the first's reply is read
    assert torch.equal(second, torch.full((2,), 10.0))
    assert first.done and torch.equal(first.result(), torch.full((2,), 2.0))
    failing = runner.submit(tgt, "fails", torch.ones(1))
    assert torch.equal(runner.impl(tgt, "double")(torch.ones(1)), torch.full((1,), 2.0))  # (kept, not raised)
    with pytest.raises(guard.ImplementationError, match="tile 7"):
        failing.result()


def test_a_generator_argument_comes_back_advanced(tgt):
    g = torch.Generator().manual_seed(3)
    first = runner.submit(tgt, "draws", g).result()
    second = runner.impl(tgt, "draws")(g)
    assert not torch.equal(first, second)  # the generator's state after the first call came back
    g2 = torch.Generator().manual_seed(3)
    torch.rand(3, generator=g2)
    assert torch.equal(second, torch.rand(3, generator=g2))


def test_a_submitted_call_past_the_limit_is_killed_and_not_called_again(tmp_path):
    for tgt in source_target(tmp_path, "pending_target", SOURCE, "process", timeout=1):
        pending = runner.submit(tgt, "sleeps", torch.ones(1), 30)
        with pytest.raises(guard.ImplementationError, match="did not return within the per-call limit of 1 s"):
            pending.result()
        with pytest.raises(guard.ImplementationError, match="not called again"):
            runner.impl(tgt, "sleeps")(torch.ones(1), 0)
        assert torch.equal(runner.impl(tgt, "double")(torch.ones(1)), torch.full((1,), 2.0))  # a fresh worker


def test_a_call_in_flight_when_the_worker_is_stopped_says_so(tmp_path):
    for tgt in source_target(tmp_path, "pending_target", SOURCE, "process"):
        pending = runner.submit(tgt, "sleeps", torch.ones(1), 0.5)
        tgt.close()
        with pytest.raises(guard.ImplementationError, match="was stopped before sleeps"):
            pending.result()


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_a_submitted_call_that_writes_into_its_arguments_shows_the_writes_at_result(isolation):
    """``attention_with_kvcache`` writes the new keys into the caller's cache (``guard.MUTABLE``):
    from a worker the writes are copied back when the result is read, as in-process."""
    from harness.boundary.loader import load_target
    target = load_target("reference", isolation=isolation)
    try:
        q = torch.randn(1, 2, 1, 4)
        k_cache, v_cache = torch.zeros(1, 2, 8, 4), torch.zeros(1, 2, 8, 4)
        k, v = torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4)
        pending = runner.submit(target, "attention_with_kvcache", q, k_cache, v_cache, k=k, v=v,
                                cache_seqlens=torch.tensor([3], dtype=torch.int32))
        out = pending.result()
        assert torch.equal(k_cache[:, :, 3:4], k) and torch.equal(v_cache[:, :, 3:4], v)
        assert out.shape == q.shape and torch.isfinite(out).all()
    finally:
        target.close()
