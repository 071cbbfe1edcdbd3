"""What a failed request into the worker brings back: the verdict of harness code run next to the
target (an AssertionError stays an AssertionError) and the target's output printed before it
raised (forwarded like any call's). Both read the "raised" reply, whose last field is a flag and
whose output is the one before it."""
from __future__ import annotations

import textwrap

import pytest
import torch

from harness import runner
from harness.boundary import guard
from tests.planted_support import source_target

NOISY = textwrap.dedent('''
    def noisy_failure(x):
        print("partial sums:", float(x.sum()))
        raise ValueError("tile 3 overflowed")
''')


def verdict(x):
    """Harness code run by ``on_target``: its AssertionError is a property's verdict."""
    assert float(x.sum()) < 0, f"sum {float(x.sum()):g} is not negative"
    return x


@pytest.fixture(params=["process", "none"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "noisy", NOISY, request.param)


def test_an_assertion_of_harness_code_in_the_worker_is_the_verdict(tgt):
    with pytest.raises(AssertionError, match="sum 3 is not negative") as info:
        runner.on_target(tgt, verdict, torch.ones(3))
    assert not isinstance(info.value, guard.ImplementationError)


def test_the_output_of_a_call_that_raised_is_forwarded(tgt, capsys):
    with pytest.raises(guard.ImplementationError, match="tile 3 overflowed"):
        runner.impl(tgt, "noisy_failure")(torch.ones(3))
    captured = capsys.readouterr()
    assert "partial sums: 3.0" in captured.out + captured.err


# ---- the worker's output capture survives a target that moves its fds ----------------------

FD_MOVERS = textwrap.dedent('''
    import os

    def closes_fds(x):
        os.close(1)
        os.close(2)
        return x

    def redirects_fds(x):
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        return x

    def prints(x):
        print("tile sums", float(x.sum()), flush=True)
        return x
''')


@pytest.fixture
def movers(tmp_path):
    yield from source_target(tmp_path, "fd_movers", FD_MOVERS, "process")  # (in-process would close pytest's)


@pytest.mark.parametrize("mover", ["closes_fds", "redirects_fds"])
def test_output_after_a_target_moved_its_fds_is_still_forwarded(movers, capsys, mover):
    runner.impl(movers, mover)(torch.ones(3))
    runner.impl(movers, "prints")(torch.ones(3))
    captured = capsys.readouterr()
    assert "tile sums 3.0" in captured.out + captured.err


def test_each_call_forwards_only_its_own_output(movers, capsys):
    for n in (1, 2, 3):
        runner.impl(movers, "prints")(torch.ones(n))
    text = "".join(capsys.readouterr())
    assert [text.count(f"tile sums {n}.0") for n in (1, 2, 3)] == [1, 1, 1]
