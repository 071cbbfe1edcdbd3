"""Chunked local attention conformance (Llama 4's ``attention_chunk_size``).

Protocol: the keys are cut into chunks of ``chunk`` positions; queries aligned to the end of the
keys; the query at absolute position p sees exactly the keys j <= p of its own chunk (j // chunk ==
p // chunk). A backend without chunked attention that falls back to a sliding window of the same
size, or to full causal attention, gives silently wrong numbers: ``other_chunks`` sets every key of
an earlier chunk to +-1e4 and holds the last chunk's queries unchanged, ``chunk_start`` holds the
first query of every chunk to exactly its own value, ``agreement`` holds random inputs (a decoding
step past a chunk boundary among them) to the float64 reference.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from harness.reference.chunked_attention import chunked_attention_math
from harness.reference.masks import chunk_mask
from harness.spec import tolerance
from harness.suites import regimes
from harness.suites.attention.configs import ChunkConfig, chunk_configs
from harness.suites.attention.helpers import poison, probe_inputs, seen_keys, show_mask
from harness.suites.kit import expect_tensor, impl, run
from harness.suites.regimes import covering

PROPERTY_PREFIX = "chunked_attention"
NAME = "chunked_attention"
pytestmark = pytest.mark.needs(NAME)

#: run first on every profile: a decoding step just past a chunk boundary, a prefill over three chunks
DECODE = ChunkConfig(batch=(1,), hq=2, hkv=2, L=1, S=9, E=4, Ev=4, dtype="float32", seed=1, chunk=4)
PREFILL = ChunkConfig(batch=(2,), hq=1, hkv=1, L=10, S=10, E=8, Ev=8, dtype="float32", seed=2, chunk=4)


def call_chunked(target, q, k, v, chunk, **kw):
    out = impl(target, NAME)(q, k, v, chunk, **kw)
    return expect_tensor(out, NAME, (*q.shape[:-1], v.shape[-1]), q.dtype, q.device)


def _positions(cfg) -> torch.Tensor:
    return torch.arange(cfg.L) + (cfg.S - cfg.L)


def check_agreement(target, cfg):
    """Random inputs equal the float64 chunked reference: each query (absolute position p, aligned to
    the end of the keys) attends to the keys j <= p of its own chunk, including a decoding step just
    past a chunk boundary; where the outputs differ the visible keys the probe measures are shown."""
    q, k, v = cfg.qkv(target.device)
    out = call_chunked(target, q, k, v, cfg.chunk)
    ref = chunked_attention_math(q.cpu(), k.cpu(), v.cpu(), cfg.chunk)
    naive = chunked_attention_math(q.cpu(), k.cpu(), v.cpu(), cfg.chunk, compute_dtype=q.dtype)
    cmp = tolerance.compare(out, ref, naive, dtype=q.dtype)
    if not cmp.ok:
        pq, pk, pv = probe_inputs(cfg, target.device)
        seen = seen_keys(call_chunked(target, pq, pk, pv, cfg.chunk), cfg.S).reshape(-1, cfg.L, cfg.S)[0].cpu()
        raise AssertionError(f"chunked attention (chunk={cfg.chunk}, L={cfg.L}, S={cfg.S}) differs from the float64 "
                             f"reference: {cmp.describe()}\n  keys each query sees (measured):{show_mask(seen)}"
                             f"\n  expected:{show_mask(chunk_mask(cfg.L, cfg.S, cfg.chunk))}")


def check_other_chunks(target, cfg):
    """Keys of earlier chunks have no influence on the queries of the last chunk, even at +-1e4 (raw
    scores capped at a quarter of the dtype's max): a sliding window of the chunk's size or full causal
    attention in its place changes them; an explicit scale is honoured."""
    last = (cfg.S - 1) // cfg.chunk * cfg.chunk  # the last chunk's first key
    rows = _positions(cfg) >= last  # the queries of the last chunk
    earlier = torch.arange(cfg.S) < last
    q, k, v = cfg.qkv(target.device)
    scale = 0.5
    out = call_chunked(target, q, k, v, cfg.chunk, scale=scale)
    ref = chunked_attention_math(q.cpu(), k.cpu(), v.cpu(), cfg.chunk, scale=scale)
    naive = chunked_attention_math(q.cpu(), k.cpu(), v.cpu(), cfg.chunk, scale=scale, compute_dtype=q.dtype)
    if earlier.any():  # (first: what a window or full attention in place of chunks gets wrong is named)
        allowed = tolerance.allowance(ref, naive, dtype=q.dtype)
        k2, v2 = poison(q, k, v, earlier.to(target.device), cfg.generator(salt=8), scale=scale)
        out2 = call_chunked(target, q, k2, v2, cfg.chunk, scale=scale)
        moved = (out2.double() - out.double())[..., rows.to(out.device), :]
        diff = float(moved.abs().nan_to_num(float("inf")).max())
        if diff > 2 * allowed:
            raise AssertionError(f"keys 0..{last - 1} belong to earlier chunks than positions {last}..{cfg.S - 1} "
                                 f"(chunk={cfg.chunk}), but setting them to +-1e4 changed those queries' outputs by "
                                 f"{diff:.3e} (a sliding window or full causal attention in place of chunks?)")
    tolerance.assert_close(out, ref, naive, dtype=q.dtype, what="chunked attention with scale=0.5")


def check_chunk_start(target, cfg):
    """The query at the first position of a chunk sees exactly one key, its own: its output is that
    key's value (to the policy's allowance), whatever the scores."""
    starts = (_positions(cfg) % cfg.chunk == 0).nonzero().flatten()
    if not starts.numel():
        return
    q, k, v = cfg.qkv(target.device)
    out = call_chunked(target, q, k, v, cfg.chunk).cpu()
    pos = starts + (cfg.S - cfg.L)
    got = out[..., starts, :]
    own = v.cpu()[..., pos, :].repeat_interleave(cfg.hq // cfg.hkv, dim=-3)
    ref = chunked_attention_math(q.cpu(), k.cpu(), v.cpu(), cfg.chunk)[..., starts, :]
    cmp = tolerance.compare(got, own.double(), ref.to(q.dtype), dtype=q.dtype)
    if not cmp.ok:
        raise AssertionError(f"the queries at chunk starts {pos.tolist()} (chunk={cfg.chunk}) must return their own "
                             f"key's value (one visible key): {cmp.describe()}")


@example(cfg=DECODE)
@example(cfg=PREFILL)
@given(cfg=chunk_configs())
@covering(regimes.CHUNK)
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@example(cfg=DECODE)
@example(cfg=PREFILL)
@given(cfg=chunk_configs())
@covering(regimes.CHUNK)
def test_other_chunks(target, cfg):
    run(target, check_other_chunks, cfg)


@example(cfg=PREFILL)
@given(cfg=chunk_configs())
@covering(regimes.CHUNK)
def test_chunk_start(target, cfg):
    run(target, check_chunk_start, cfg)
