"""The call rules (``harness/boundary/guard.py``) hold on both sides of the pipe: a call that breaks one
breaks it in the same words in this process (``--isolation none``) and in the target's worker,
where the worker judges it with the same ``guard.Inputs``; a cache a name may write into comes back
written, and a function that ran past the limit is not called again."""
from __future__ import annotations

import textwrap

import pytest
import torch

from harness import runner
from harness.boundary import guard
from tests.planted_support import source_target

BREAKS = textwrap.dedent('''
    import time

    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                     scale=None, enable_gqa=False):
        width = int(query.shape[-1])
        if width == 1:
            key.mul_(2)  # writes into an input
            return query.clone()
        if width == 2:
            return query  # the output is the query's memory
        if width == 3:
            time.sleep(30)  # past any limit of this test
        return query * 2

    def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, **options):
        if int(q.shape[-1]) == 1:
            k_cache.resize_(1)  # may write into the cache, not resize it
            return q.clone()
        k_cache.fill_(7.0)  # a write it may make
        return q.clone()
''')

SDPA, KV = "scaled_dot_product_attention", "attention_with_kvcache"


@pytest.fixture(params=["none", "process"])
def tgt(request, tmp_path):
    yield from source_target(tmp_path, "breaks", BREAKS, request.param, timeout=1)


def _message(fn, *args) -> str:
    with pytest.raises(guard.ImplementationError) as info:
        fn(*args)
    return str(info.value)


def test_a_modified_input_is_named(tgt):
    x = torch.ones(1, 1, 2, 1)
    message = _message(runner.impl(tgt, SDPA), x, x.clone(), x.clone())
    assert message == (f"{SDPA}(Tensor(1, 1, 2, 1):float32, Tensor(1, 1, 2, 1):float32, Tensor(1, 1, 2, 1):float32) "
                       f"modified its input in place (argument 1)")


def test_an_output_that_aliases_an_input_is_named(tgt):
    x = torch.ones(1, 1, 2, 2)
    assert _message(runner.impl(tgt, SDPA), x, x.clone(), x.clone()).endswith(
        "returned a tensor that shares the memory of its argument 0: the output must be new memory")


def test_a_resized_cache_is_named_and_a_written_one_comes_back(tgt):
    cache = torch.zeros(1, 4, 1, 2)
    message = _message(runner.impl(tgt, KV), torch.ones(1, 1, 1, 1), cache, cache.clone())
    assert message.endswith("resized its argument 1 from (1, 4, 1, 2) to (1,): it may only write into it")
    runner.impl(tgt, KV)(torch.ones(1, 1, 1, 2), cache, cache.clone())
    assert torch.equal(cache, torch.full_like(cache, 7.0))  # (in-process, or copied back from the worker)


def test_a_function_that_hung_is_not_called_again(tgt):
    x = torch.ones(1, 1, 2, 3)
    fn = runner.impl(tgt, SDPA)
    assert "did not return within the per-call limit of 1 s (--impl-timeout)" in _message(fn, x, x, x)
    assert _message(fn, x, x, x).endswith("previously did not return within the per-call limit of 1 s "
                                          "(--impl-timeout) when called with (Tensor(1, 1, 2, 3):float32, "
                                          "Tensor(1, 1, 2, 3):float32, Tensor(1, 1, 2, 3):float32); not called again")
    assert tgt.limit.hung  # the target's limit holds it, either backend


def test_arguments_are_described_by_shape_and_only_when_a_message_is_made():
    """A call's arguments appear in messages by shape and dtype, tensors inside lists too (their
    printed values said little and cost seconds of a conformance run), and are described only for a
    message."""
    q = torch.zeros(2, 3)
    text = guard.describe_args((q, [torch.ones(4), torch.ones(5, dtype=torch.float64)], (1,)), {"scale": 0.5})
    assert text == "Tensor(2, 3):float32, [Tensor(4,):float32, Tensor(5,):float64], (1,), scale=0.5"

    class Loud:
        shown = 0

        def __repr__(self):
            Loud.shown += 1
            return "loud"

    call = guard.Described("f", (Loud(),), {})
    assert Loud.shown == 0                      # nothing described for a call that makes no message
    assert f"{call}" == "f(loud)" and str(call) == "f(loud)" and Loud.shown == 1  # then once, kept
