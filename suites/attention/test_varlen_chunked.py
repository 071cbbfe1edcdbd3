"""Chunked local attention over packed documents (Llama 4's ``attention_chunk_size`` in packed
training or batched prefill): ``attention_varlen(..., chunk=c)``.

Each document's chunks restart with it: the query at position p of its document (bottom-right) sees
the keys j <= p of that document with j // c == p // c. A kernel that counts chunks from the packed
row's start (a global-index mask combined with the document mask, right only for documents that
start at a multiple of c), or that falls back to a window of c keys, gives silently wrong numbers.
The option is optional: a function without ``chunk`` is reported unsupported (``varlen_chunked``).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from harness.reference.attention_varlen import bounds, sequence_math, visible_keys
from harness.spec import tolerance
from harness.suites.attention import varlen_helpers as vh
from harness.suites.attention.configs import VarlenConfig, chunked_varlen_configs
from harness.suites.attention.helpers import EXTREME
from harness.suites.kit import run

PROPERTY_PREFIX = "varlen_chunked"
pytestmark = [pytest.mark.needs(vh.VARLEN), pytest.mark.uses("varlen_chunked")]

#: run first on every profile: three documents packed at rows 0, 5 and 12 with chunks of 4
PACKED = VarlenConfig(q_lens=(5, 7, 9), k_lens=(5, 7, 9), hq=2, hkv=1, E=8, Ev=8, dtype="float32", seed=3,
                      causal=True, chunk=4)


def _from_packed_start(cfg: VarlenConfig, q, k, v) -> torch.Tensor:
    """float64 attention whose chunks are counted from the packed row's start (the document mask kept)."""
    cu_q, cu_k = cfg.cu_seqlens()
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64)
    for (qs, qe), (ks, ke) in zip(bounds(cu_q), bounds(cu_k)):
        if qe == qs:
            continue
        Lq, Lk = qe - qs, ke - ks
        pos = torch.arange(Lq)[:, None] + (Lk - Lq)
        j = torch.arange(Lk)[None, :]
        visible = visible_keys(Lq, Lk, True, None) & ((ks + j) // cfg.chunk == (ks + pos) // cfg.chunk)
        seq = sequence_math(*(t[a:b].cpu().transpose(0, 1) for t, (a, b) in ((q, (qs, qe)), (k, (ks, ke)), (v, (ks, ke)))),
                            visible)
        out[qs:qe] = seq.transpose(0, 1)
    return out


def _diagnosis(cfg: VarlenConfig, q, k, v, out) -> str:
    for what, guess, kw in (("chunks counted from the packed row's start, not from each document's", 
                             _from_packed_start(cfg, q, k, v), None),
                            (f"a sliding window of {cfg.chunk} keys in place of chunks", None, {"chunk": None,
                                                                                                "window": cfg.chunk})):
        if guess is None:
            guess = vh.truth(cfg, q, k, v, **kw)
        if tolerance.compare(out.cpu(), guess, vh.naive(cfg, q, k, v), dtype=q.dtype).ok:
            return f"\n  the output matches {what}"
    return ""


def check_agreement(target, cfg):
    """2 .. 4 packed documents (most starting at a row that is no multiple of the chunk), causal,
    queries as many as the keys or a decoding tail: the output equals float64 chunked attention run on
    each document alone, its chunks counted from the document's first token; a failure names the
    packed-row count or a window in place of chunks when the output matches one."""
    q, k, v = cfg.qkv(target.device)
    out = vh.call_varlen(target, cfg, q, k, v)
    try:
        vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}: against chunked attention run per document")
    except AssertionError as exc:
        raise AssertionError(f"{exc}{_diagnosis(cfg, q, k, v, out)}") from None


def check_other_chunks(target, cfg):
    """The values of every key in an earlier chunk of its document set to +-1e4 change no output row of
    the queries in their document's last chunk: nothing of an earlier chunk is seen (a window of the
    chunk's size reaches back into it)."""
    q, k, v = cfg.qkv(target.device)
    cu_q, cu_k = cfg.cu_seqlens()
    earlier = torch.zeros(cfg.total_k, dtype=torch.bool)
    last = torch.zeros(cfg.total_q, dtype=torch.bool)
    for (qs, qe), (ks, ke) in zip(bounds(cu_q), bounds(cu_k)):
        start = (ke - ks - 1) // cfg.chunk * cfg.chunk if ke > ks else 0  # the document's last chunk
        earlier[ks:ks + start] = True
        pos = torch.arange(qe - qs) + (ke - ks) - (qe - qs)
        last[qs:qe] = pos >= start
    if not earlier.any():
        return
    g = cfg.generator(salt=8)
    v2 = v.clone()
    sign = torch.randint(0, 2, v2[earlier.to(v.device)].shape, generator=g).to(v.device) * 2 - 1
    v2[earlier.to(v.device)] = (sign * EXTREME).to(v.dtype)
    out = vh.call_varlen(target, cfg, q, k, v2)
    try:
        vh.agree(out, cfg, q, k, v, f"{vh.describe(cfg)}: the last chunk's queries with the earlier chunks' values "
                                    f"at +-1e4", rows=last)
    except AssertionError as exc:
        raise AssertionError(f"values of earlier chunks (+-1e4) reached the queries of their document's last chunk "
                             f"(chunk {cfg.chunk}; a window or full causal attention in place of chunks?): {exc}") from None


@example(cfg=PACKED)
@given(cfg=chunked_varlen_configs())
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@example(cfg=PACKED)
@given(cfg=chunked_varlen_configs())
def test_other_chunks(target, cfg):
    run(target, check_other_chunks, cfg)
