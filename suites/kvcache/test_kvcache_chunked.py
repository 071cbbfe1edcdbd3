"""Chunked local attention over a KV cache (Llama 4's ``attention_chunk_size`` at generation):
``attention_with_kvcache(..., chunk=c)``.

The query at absolute position p sees the keys j <= p with j // c == p // c, chunks counted from
the start of the sequence, not from the call's first token: after a prompt, a decode step at p sees
the keys of its own chunk only, however many the cache holds. A kernel that falls back to a window
of c keys, to full causal attention, or that counts chunks from the call gives silently wrong
numbers on every step past the first chunk. The option is optional: a function without ``chunk``
is reported unsupported (``kvcache_chunked``), never failed.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.reference.chunked_attention import chunked_attention_math
from harness.suites.kit import run
from harness.suites.kvcache import configs as kvc
from harness.suites.kvcache import helpers as kv

PROPERTY_PREFIX = "kvcache_chunked"
pytestmark = [pytest.mark.needs(kv.KV), pytest.mark.uses("kvcache_chunked")]


def _shared_heads(cfg, x: torch.Tensor) -> torch.Tensor:
    """k or v (B, Hkv, T, .) with each KV head repeated for its query heads (B, Hq, T, .)."""
    return x.repeat_interleave(cfg.hq // cfg.hkv, dim=1)


def check_decode(target, cfg):
    """The sequence fed as a prefill and decode steps, or in calls of any sizes, crossing several chunk
    boundaries: the outputs, concatenated, equal one float64 chunked-attention call over the whole
    sequence (``chunked_attention``'s reference), and every key/value is in its slot."""
    q, k, v = cfg.qkv(target.device)
    kc, vc = cfg.garbage_cache(target.device)
    out = kv.feed(target, cfg, q, k, v, kc, vc)
    T = cfg.total
    kv.assert_cache_holds(kc, vc, k, v, torch.arange(T), torch.arange(T), f"after the calls {cfg.chunks}")
    kk, vv = _shared_heads(cfg, k.cpu()), _shared_heads(cfg, v.cpu())
    truth = chunked_attention_math(q.cpu(), kk, vv, cfg.chunk)
    naive = chunked_attention_math(q.cpu(), kk, vv, cfg.chunk, compute_dtype=q.dtype).double()
    try:
        kv.assert_close(out, truth, naive, q.dtype, "output")
    except AssertionError as exc:
        first = (torch.tensor(cfg.chunks).cumsum(0) - torch.tensor(cfg.chunks)).tolist()
        raise AssertionError(f"chunk {cfg.chunk}, calls {cfg.chunks} (starting at positions {first}): the "
                             f"outputs, concatenated, are not chunked attention over the {T} positions (a query "
                             f"at p sees the keys j <= p with j // {cfg.chunk} = p // {cfg.chunk}): {exc}") from None


def check_other_chunks(target, cfg):
    """One call on caches of different lengths: every cached key and value of a chunk before the one the
    call's first query is in holds +-1e4 (keys shrunk so raw scores stay below a quarter of the dtype's
    max); no query of the call may see them, so the output equals the float64 cache reference."""
    q, k, v = cfg.qkv(target.device)
    qn, kn, vn = kv.new_tokens(cfg, q), kv.new_tokens(cfg, k), kv.new_tokens(cfg, v)
    starts = [(c // cfg.chunk) * cfg.chunk for c in cfg.prior]  # the first query's chunk starts here
    kc, vc = kv.prefilled(cfg, k, v, target.device, poison_before=starts, q=qn)
    (ref, _, _), nai = kv.one_call_truth(cfg, qn, kc, vc, kn, vn)
    out = kv.call_kv(target, cfg, qn, kc, vc, kn, vn, kv.seqlens(cfg.prior, q.device), **kv.options(cfg))
    try:
        kv.assert_close(out, ref, nai, q.dtype, "output")
    except AssertionError as exc:
        raise AssertionError(f"chunk {cfg.chunk}, cache_seqlens {list(cfg.prior)}, {cfg.chunks[0]} new token(s): "
                             f"the cached keys before positions {starts} (earlier chunks) hold +-1e4 and changed "
                             f"the output: {exc}") from None


@given(cfg=kvc.chunked_configs())
def test_decode(target, cfg):
    run(target, check_decode, cfg)


@given(cfg=kvc.chunked_configs(ragged=True))
def test_other_chunks(target, cfg):
    run(target, check_other_chunks, cfg)
