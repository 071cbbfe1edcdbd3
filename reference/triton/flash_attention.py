"""Flash attention in Triton: a tiled forward with online softmax, and a tiled backward.

    out = softmax(Q K^T * scale + causal/window mask) V,   scale = 1/sqrt(E) by default

Shapes (torch's SDPA contract, leading batch dims flattened to B):
    query (..., Hq, L, E)    key (..., Hkv, S, E)    value (..., Hkv, S, Ev)    out (..., Hq, L, Ev)
    lse   (B, Hq, L) float32/float64: log-sum-exp of each score row, kept for the backward

Head dims are padded to a power of two BE, BEV (16 ... 256) and masked, so L, S, E and Ev need
not be multiples of anything. Query head h reads KV head h // (Hq // Hkv) (GQA / MQA).
``is_causal`` is bottom-right aligned (query i sees the keys j <= i + S - L, FlashAttention's
convention); ``sliding_window_attention`` also drops the keys j <= i + S - L - window. A row with
no visible key returns zeros (its lse is +inf).

Tiles (``tiles``, chosen on the host per call; ``HARNESS_TILES``): BLOCK_M = BLOCK_N rows from the
bytes of one key + value row, row = (BE + BEV) * b, b the element size of tl.dot's operands when
compiled (2 for float16/bfloat16, 4 for float32, 8 for float64):

    row <= 512 bytes: 64 rows      row <= 1024: 32 rows      else: 16 (tl.dot's compiled minimum)

so a rows x BE or rows x BEV tile is at most 32 KiB, and so is the accumulator (rows x BEV in
float32, float64 for float64); num_warps 4 at 64 rows, 8 below. The operands of tl.dot go
through shared memory, and the compiled loop keeps num_stages copies of what it loads, so
num_stages is the largest of 3, 2, 1 (64 rows; 2, 1 below) whose estimate fits a 96 KiB budget
(an H100/H200 block has ~227 KiB):

    forward, decode:  (BLOCK_M * BE + stages * BLOCK_N * (BE + BEV)) * b           <= 96 KiB
    backward:         rows * (BE + BEV + stages * (BE + 2 BEV)) * b   (K, V held; Q, dO, O looped)

The backward holds more (dK, dV accumulators beside K, V; Q, dO, O per step): it halves the rows
while rows * (BE + BEV) * acc_bytes > 32 KiB or the 1-stage estimate exceeds the budget, down to
16. At BE = BEV = 256: float16 32 rows, 2 stages, 80 KiB; float32 16 rows, 2 stages, 80 KiB;
float64 16 rows, 1 stage, 96 KiB (backward: 16, 2, 64 KiB; 16, 1, 80 KiB; 16, 1, 160 KiB). Only
float64 backward with BEV = 256 (or BE = 256, BEV = 128) exceeds the budget, at the floor of 16
rows and 1 stage: 100 ... 160 KiB, under the 227 KiB limit (``tests/test_triton_tiles.py``).
The interpreter runs the same tiles (so a CPU run exercises every size a GPU compiles).

Forward (one program per (query block, batch x head)): for each key block in range, scores
S_ij = q_i k_j^T * scale; running max m_i, running sum l_i = l_i * exp(m_old - m_new) + sum_j
exp(S_ij - m_new), and acc = acc * exp(m_old - m_new) + P V (the online-softmax rescale).
Causal and windowed programs skip the key blocks no query of theirs can see.

Backward (FlashAttention-2): delta_i = rowsum(dO_i * O_i); P = exp(S - lse);
dV = P^T dO; dP = dO V^T; dS = P * (dP - delta); dK = dS^T Q * scale; dQ = dS K * scale.
One program per key block computes dK, dV (summing over the query heads of its KV group: no
atomics, deterministic); one per query block computes dQ.

On a GPU these compile; on a CPU the harness runs them under Triton's interpreter.
"""
from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

#: every row count ``tiles`` picks is 16, 32 or 64; the harness is told the largest only: a
#: length T-1, T, T+1, 2T+1 of T = 64 is one of the 16- and 32-row tiles too (64 = 2 x 32 = 4 x 16),
#: where (16, 32, 64) would map long lengths to 16/32 classes (31, 25, 65) within one or two
#: 64-row blocks of a head dim <= 64 (tests/test_triton_tiles.py's doc)
HARNESS_TILES = (64,)
HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}
HARNESS_UNSUPPORTED = {"attn_mask", "dropout", "autocast"}
HARNESS_SIZES = {"E": range(1, 257), "Ev": range(1, 257)}


@triton.jit
def _dot(a, b, ACC: tl.constexpr, DOT: tl.constexpr):
    """a @ b accumulated in ACC, the operands in DOT (their own dtype, except bfloat16 under the
    interpreter: triton 3.9's interpreter misreads bfloat16 operands of tl.dot, so they go as float32).
    ``ieee``: float32 operands are multiplied in float32, not tf32 (a reference is held to float32's
    tolerance); it changes nothing for the other dtypes."""
    return tl.dot(a.to(DOT), b.to(DOT), out_dtype=ACC, input_precision="ieee")


@triton.jit
def _mask(offs_m, offs_n, L, S, off, window, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr):
    """(BLOCK_M, BLOCK_N) bool: which keys each query sees (off = S - L: bottom-right)."""
    keep = (offs_m[:, None] < L) & (offs_n[None, :] < S)
    if CAUSAL:
        keep = keep & (offs_n[None, :] <= offs_m[:, None] + off)
    if WINDOWED:
        keep = keep & (offs_n[None, :] > offs_m[:, None] + off - window)
    return keep


@triton.jit
def _key_range(start_m, S, off, window, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               CAUSAL: tl.constexpr, WINDOWED: tl.constexpr):
    """The key blocks [lo, hi) some query of the block starting at start_m may see."""
    lo = 0
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, tl.maximum(start_m + BLOCK_M + off, 0))
    if WINDOWED:
        lo = tl.maximum(start_m + off - window + 1, 0) // BLOCK_N * BLOCK_N
    return lo, hi


@triton.jit
def _fwd(Q, K, V, O, LSE, SCALE, L, S, Hq, group, off, window,
         sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
         E: tl.constexpr, EV: tl.constexpr, BE: tl.constexpr, BEV: tl.constexpr,
         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr,
         ACC: tl.constexpr, DOT: tl.constexpr):
    scale = tl.load(SCALE)  # a float64 scale stays float64 (a float argument would be fp32)
    start_m = tl.program_id(0) * BLOCK_M
    b = tl.program_id(1) // Hq
    h = tl.program_id(1) % Hq
    hk = h // group  # the KV head of query head h
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_e = tl.arange(0, BE)
    offs_ev = tl.arange(0, BEV)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :],
                mask=(offs_m[:, None] < L) & (offs_e[None, :] < E), other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), ACC)
    l_i = tl.zeros([BLOCK_M], ACC)
    acc = tl.zeros([BLOCK_M, BEV], ACC)
    lo, hi = _key_range(start_m, S, off, window, BLOCK_M, BLOCK_N, CAUSAL, WINDOWED)
    for start_n in range(lo, hi, BLOCK_N):
        n = start_n + offs_n
        k = tl.load(K + b * skb + hk * skh + n[:, None] * skn + offs_e[None, :],
                    mask=(n[:, None] < S) & (offs_e[None, :] < E), other=0.0)
        v = tl.load(V + b * svb + hk * svh + n[:, None] * svn + offs_ev[None, :],
                    mask=(n[:, None] < S) & (offs_ev[None, :] < EV), other=0.0)
        s = _dot(q, tl.trans(k), ACC, DOT) * scale
        s = tl.where(_mask(offs_m, n, L, S, off, window, CAUSAL, WINDOWED), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key seen yet
        alpha = tl.exp(m_i - m_safe)  # the online-softmax rescale of what was summed so far
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, ACC, DOT)
        m_i = m_new
    seen = l_i > 0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    lse = tl.where(seen, m_i + tl.log(tl.where(seen, l_i, 1.0)), float("inf"))
    tl.store(O + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :], out.to(O.dtype.element_ty),
             mask=(offs_m[:, None] < L) & (offs_ev[None, :] < EV))
    tl.store(LSE + (b * Hq + h) * L + offs_m, lse, mask=offs_m < L)


@triton.jit
def _bwd_dkdv(Q, K, V, O, DO, LSE, DK, DV, SCALE, L, S, Hq, Hkv, group, off, window,
              sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
              E: tl.constexpr, EV: tl.constexpr, BE: tl.constexpr, BEV: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr,
              ACC: tl.constexpr, DOT: tl.constexpr):
    """dK, dV of one key block of KV head hk: sums over its group's query heads and query blocks.
    DO, O and DQ share the strides of O (sob, soh, som); DK/DV those of K/V."""
    scale = tl.load(SCALE)
    start_n = tl.program_id(0) * BLOCK_N
    b = tl.program_id(1) // Hkv
    hk = tl.program_id(1) % Hkv
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_e = tl.arange(0, BE)
    offs_ev = tl.arange(0, BEV)
    kmask = (offs_n[:, None] < S) & (offs_e[None, :] < E)
    vmask = (offs_n[:, None] < S) & (offs_ev[None, :] < EV)
    k = tl.load(K + b * skb + hk * skh + offs_n[:, None] * skn + offs_e[None, :], mask=kmask, other=0.0)
    v = tl.load(V + b * svb + hk * svh + offs_n[:, None] * svn + offs_ev[None, :], mask=vmask, other=0.0)
    dk = tl.zeros([BLOCK_N, BE], ACC)
    dv = tl.zeros([BLOCK_N, BEV], ACC)
    lo = 0  # the query blocks that may see this key block
    hi = L
    if CAUSAL:
        lo = tl.maximum(start_n - off, 0) // BLOCK_M * BLOCK_M
    if WINDOWED:
        hi = tl.minimum(L, tl.maximum(start_n + BLOCK_N - 1 + window - off, 0))
    for g in range(0, group):
        h = hk * group + g
        for start_m in range(lo, hi, BLOCK_M):
            m = start_m + offs_m0
            rows = m[:, None] < L
            q = tl.load(Q + b * sqb + h * sqh + m[:, None] * sqm + offs_e[None, :],
                        mask=rows & (offs_e[None, :] < E), other=0.0)
            do = tl.load(DO + b * sob + h * soh + m[:, None] * som + offs_ev[None, :],
                         mask=rows & (offs_ev[None, :] < EV), other=0.0)
            o = tl.load(O + b * sob + h * soh + m[:, None] * som + offs_ev[None, :],
                        mask=rows & (offs_ev[None, :] < EV), other=0.0)
            lse = tl.load(LSE + (b * Hq + h) * L + m, mask=m < L, other=0.0)
            delta = tl.sum(do.to(ACC) * o.to(ACC), 1)  # rowsum(dO * O)
            s = _dot(q, tl.trans(k), ACC, DOT) * scale
            keep = _mask(m, offs_n, L, S, off, window, CAUSAL, WINDOWED)
            p = tl.where(keep, tl.exp(s - lse[:, None]), 0.0)
            dv += _dot(tl.trans(p.to(do.dtype)), do, ACC, DOT)
            dp = _dot(do, tl.trans(v), ACC, DOT)
            ds = p * (dp - delta[:, None])
            dk += _dot(tl.trans(ds.to(q.dtype)), q, ACC, DOT) * scale
    tl.store(DK + b * skb + hk * skh + offs_n[:, None] * skn + offs_e[None, :], dk.to(DK.dtype.element_ty), mask=kmask)
    tl.store(DV + b * svb + hk * svh + offs_n[:, None] * svn + offs_ev[None, :], dv.to(DV.dtype.element_ty), mask=vmask)


@triton.jit
def _bwd_dq(Q, K, V, O, DO, LSE, DQ, SCALE, L, S, Hq, group, off, window,
            sqb, sqh, sqm, skb, skh, skn, svb, svh, svn, sob, soh, som,
            E: tl.constexpr, EV: tl.constexpr, BE: tl.constexpr, BEV: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOWED: tl.constexpr,
            ACC: tl.constexpr, DOT: tl.constexpr):
    """dQ of one query block: dQ = sum over its key blocks of dS K * scale (DQ has Q's strides)."""
    scale = tl.load(SCALE)
    start_m = tl.program_id(0) * BLOCK_M
    b = tl.program_id(1) // Hq
    h = tl.program_id(1) % Hq
    hk = h // group
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_e = tl.arange(0, BE)
    offs_ev = tl.arange(0, BEV)
    rows = offs_m[:, None] < L
    qmask = rows & (offs_e[None, :] < E)
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :], mask=qmask, other=0.0)
    do = tl.load(DO + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :],
                 mask=rows & (offs_ev[None, :] < EV), other=0.0)
    o = tl.load(O + b * sob + h * soh + offs_m[:, None] * som + offs_ev[None, :],
                mask=rows & (offs_ev[None, :] < EV), other=0.0)
    lse = tl.load(LSE + (b * Hq + h) * L + offs_m, mask=offs_m < L, other=0.0)
    delta = tl.sum(do.to(ACC) * o.to(ACC), 1)
    dq = tl.zeros([BLOCK_M, BE], ACC)
    lo, hi = _key_range(start_m, S, off, window, BLOCK_M, BLOCK_N, CAUSAL, WINDOWED)
    for start_n in range(lo, hi, BLOCK_N):
        n = start_n + offs_n0
        k = tl.load(K + b * skb + hk * skh + n[:, None] * skn + offs_e[None, :],
                    mask=(n[:, None] < S) & (offs_e[None, :] < E), other=0.0)
        v = tl.load(V + b * svb + hk * svh + n[:, None] * svn + offs_ev[None, :],
                    mask=(n[:, None] < S) & (offs_ev[None, :] < EV), other=0.0)
        s = _dot(q, tl.trans(k), ACC, DOT) * scale
        p = tl.where(_mask(offs_m, n, L, S, off, window, CAUSAL, WINDOWED), tl.exp(s - lse[:, None]), 0.0)
        dp = _dot(do, tl.trans(v), ACC, DOT)
        ds = p * (dp - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, ACC, DOT) * scale
    tl.store(DQ + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_e[None, :], dq.to(DQ.dtype.element_ty), mask=qmask)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
       torch.float64: tl.float64}


def dot_dtype(dtype: torch.dtype):
    """The dtype of tl.dot's operands: the input's; float32 for bfloat16 under the interpreter."""
    if dtype == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1":
        return tl.float32
    return _TL[dtype]


def _pad(d: int) -> int:
    return max(16, triton.next_power_of_2(d))  # tl.dot needs >= 16 when compiled


#: the shared-memory estimate ``tiles`` keeps under (bytes), and the registers' tile bound
SHARED_BUDGET = 96 * 1024
TILE_BYTES = 32 * 1024


def shared_bytes(rows: int, BE: int, BEV: int, size: int, stages: int, backward: bool = False) -> int:
    """The estimate of tl.dot operand tiles in shared memory (see the module doc)."""
    if backward:
        return rows * (BE + BEV + stages * (BE + 2 * BEV)) * size
    return (rows * BE + stages * rows * (BE + BEV)) * size


def tiles(BE: int, BEV: int, dtype: torch.dtype, backward: bool = False) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for padded head dims BE, BEV and inputs of
    ``dtype``: the rule of the module doc. The element size is the compiled tl.dot operands'
    (the input's: bfloat16 is 2 bytes though the interpreter feeds it float32, ``dot_dtype``), so
    the interpreter runs the tiles a GPU compiles."""
    size = torch.empty((), dtype=dtype).element_size()
    acc = 8 if dtype == torch.float64 else 4
    row = (BE + BEV) * size
    rows = 64 if row <= 512 else 32 if row <= 1024 else 16
    if backward:
        while rows > 16 and (rows * (BE + BEV) * acc > TILE_BYTES
                             or shared_bytes(rows, BE, BEV, size, 1, True) > SHARED_BUDGET):
            rows //= 2
    stages = next((s for s in ((3, 2, 1) if rows == 64 else (2, 1))
                   if shared_bytes(rows, BE, BEV, size, s, backward) <= SHARED_BUDGET), 1)
    return rows, rows, 4 if rows == 64 else 8, stages


def launch(BE: int, BEV: int, dtype: torch.dtype, backward: bool = False) -> dict:
    """A kernel's tile keywords: BLOCK_M, BLOCK_N (constexprs), num_warps, num_stages (launch
    options; the interpreter ignores them)."""
    m, n, warps, stages = tiles(BE, BEV, dtype, backward)
    return dict(BLOCK_M=m, BLOCK_N=n, num_warps=warps, num_stages=stages)


def scalar(value: float, like: torch.Tensor) -> torch.Tensor:
    """A kernel's float argument as a 1-element tensor in the accumulator's dtype (float64 for
    float64 inputs, else float32), read with ``tl.load``: compiled Triton types a Python float
    argument fp32, which rounds a float64 kernel's scale or eps (``harness.boundary.interpret.compiled_scalars``)."""
    return torch.tensor([value], dtype=torch.float64 if like.dtype == torch.float64 else torch.float32,
                        device=like.device)


def _strides(*ts):
    return [s for t in ts for s in t.stride()[:3]]


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, causal, window):
        B, Hq, L, E = q.shape
        _, Hkv, S, Ev = v.shape
        o = torch.empty((B, Hq, L, Ev), dtype=q.dtype, device=q.device)
        acc = tl.float64 if q.dtype == torch.float64 else tl.float32
        lse = torch.empty((B, Hq, L), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
                          device=q.device)
        meta = dict(E=E, EV=Ev, BE=_pad(E), BEV=_pad(Ev), CAUSAL=causal, WINDOWED=window is not None,
                    ACC=acc, DOT=dot_dtype(q.dtype))
        args = (scalar(scale, q), L, S, Hq, Hq // Hkv, S - L, window or 0)
        tile = launch(meta["BE"], meta["BEV"], q.dtype)
        _fwd[(triton.cdiv(L, tile["BLOCK_M"]), B * Hq)](q, k, v, o, lse, *args, *_strides(q, k, v, o),
                                                        **meta, **tile)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.meta, ctx.args = meta, args
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        B, Hq, L, _ = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        scale, L, S, Hq, group, off, window = ctx.args
        strides = _strides(q, k, v, o)
        tile = launch(ctx.meta["BE"], ctx.meta["BEV"], q.dtype, backward=True)
        _bwd_dkdv[(triton.cdiv(S, tile["BLOCK_N"]), B * Hkv)](q, k, v, o, do, lse, dk, dv, scale, L, S, Hq, Hkv,
                                                              group, off, window, *strides, **ctx.meta, **tile)
        _bwd_dq[(triton.cdiv(L, tile["BLOCK_M"]), B * Hq)](q, k, v, o, do, lse, dq, *ctx.args, *strides,
                                                           **ctx.meta, **tile)
        return dq, dk, dv, None, None, None


def _attention(query, key, value, scale, causal, window, enable_gqa):
    *batch, Hq, L, E = query.shape
    Hkv, S, Ev = key.shape[-3], key.shape[-2], value.shape[-1]
    if Hq != Hkv and (not enable_gqa or Hq % Hkv):
        raise ValueError(f"query has {Hq} heads and key {Hkv}; needs enable_gqa and Hq % Hkv == 0")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    q, k, v = (t.reshape(-1, *t.shape[-3:]).contiguous() for t in (query, key, value))
    out = _FlashAttention.apply(q, k, v, scale, causal, window)
    return out.reshape(*batch, Hq, L, Ev)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """torch's SDPA without attn_mask and dropout (declared unsupported); causal is bottom-right."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("attn_mask and dropout are not implemented by this kernel")
    return _attention(query, key, value, scale, bool(is_causal), None, enable_gqa)


def sliding_window_attention(query, key, value, window, scale=None):
    """Causal local attention (bottom-right): query i sees the keys i + S - L - window < j <= i + S - L."""
    return _attention(query, key, value, scale, True, int(window), False)
