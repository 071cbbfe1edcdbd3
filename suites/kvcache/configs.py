"""Configurations for the KV-cache suite (``suites/kvcache/test_kvcache.py``), and its tile-boundary regime.

As in ``harness.spec.configs``: the suites draw sizes, dtype and a seed, and rebuild every tensor from
the seed, so a shrunk counterexample is a handful of integers that ``harness repro`` replays.

A ``KVCacheConfig`` describes a sequence of calls into ``attention_with_kvcache``: batch item b
starts with ``lengths[b]`` positions already cached (written by the harness; all 0 when
``lengths`` is empty) and then feeds the tokens in ``chunks`` (a prefill of 5 and three decode
steps: (5, 1, 1, 1)); the cache has ``max(lengths) + sum(chunks) + slack`` slots, or
``window + slack`` for a rolling cache (``window`` > 0). ``rotary_dim`` > 0: RoPE tables over the
first rotary_dim dims (``interleaved`` pairs or rotate-half).

``block_size`` > 0: a paged cache (``suites/kvcache/test_paged_kvcache.py``): each item owns
``max_blocks`` pages of a pool of ``num_blocks`` (``spare`` more that no item names), laid out by a
permutation drawn from the seed; items 0 and 1 share their first ``shared`` pages (a common prefix:
the harness makes their first shared * block_size positions equal). ``softcap`` > 0 and ``sinks``
(one logit per query head, drawn from the seed) are the kernel options of issue 24.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.suites.strategies import DTYPE, SEED
from harness.spec.configs import Config, register
from harness.suites.regimes import GQA_HEADS


@register
@dataclass(frozen=True)
class KVCacheConfig(Config):
    """q (batch, hq, T, E); k (batch, hkv, T, E); v (batch, hkv, T, Ev), T = max(lengths) + sum(chunks)."""

    batch: int
    hq: int
    hkv: int
    E: int
    Ev: int
    dtype: str
    seed: int
    chunks: tuple[int, ...]
    lengths: tuple[int, ...] = ()
    slack: int = 0
    window: int = 0
    rotary_dim: int = 0
    interleaved: bool = False
    causal: bool = True
    block_size: int = 0
    spare: int = 0
    shared: int = 0
    softcap: float = 0.0
    sinks: bool = False
    chunk: int = 0

    @property
    def prior(self) -> tuple[int, ...]:
        """Positions already cached per batch item before the first call."""
        return self.lengths or (0,) * self.batch

    @property
    def total(self) -> int:
        return max(self.prior) + sum(self.chunks)

    @property
    def slots(self) -> int:
        """Smax: a linear cache holds every position; a rolling one ``window + slack``; a paged one
        max_blocks * block_size per item."""
        if self.block_size:
            return self.max_blocks * self.block_size
        return self.window + self.slack if self.window else self.total + self.slack

    @property
    def max_blocks(self) -> int:
        """Pages per item (the block table's columns): total + slack positions."""
        return math.ceil((self.total + self.slack) / self.block_size)

    @property
    def num_blocks(self) -> int:
        """Pages in the pool: every item's, the shared ones once, and the spare ones."""
        return self.batch * self.max_blocks - (self.shared if self.batch > 1 else 0) + self.spare

    def block_table(self, device="cpu", contiguous: bool = False) -> torch.Tensor:
        """(batch, max_blocks) int32: the pool's pages handed out in a random order drawn from the
        seed (``contiguous``: in order, item b's pages one run after item a's), item 1's first
        ``shared`` entries those of item 0."""
        n = self.num_blocks
        order = torch.arange(n) if contiguous else torch.randperm(n, generator=self.generator(salt=5))
        table, used = torch.empty(self.batch, self.max_blocks, dtype=torch.int32), 0
        for b in range(self.batch):
            for j in range(self.max_blocks):
                if b == 1 and j < self.shared:
                    table[b, j] = table[0, j]
                else:
                    table[b, j], used = order[used], used + 1
        return table.to(device)

    def sink_logits(self, device="cpu") -> torch.Tensor | None:
        """(hq,) float32 sinks (N(0, 2^2), as learned ones spread), or None without ``sinks``."""
        if not self.sinks:
            return None
        return (2 * torch.randn(self.hq, generator=self.generator(salt=7))).to(device)

    def qkv(self, device="cpu"):
        """Random q, k, v over all T positions, in the configured dtype (drawn in float32); with
        ``shared`` pages, item 1's first shared * block_size keys and values are item 0's."""
        g = self.generator()
        T = self.total
        q = torch.randn(self.batch, self.hq, T, self.E, generator=g)
        k = torch.randn(self.batch, self.hkv, T, self.E, generator=g)
        v = torch.randn(self.batch, self.hkv, T, self.Ev, generator=g)
        if self.shared and self.batch > 1:
            p = self.shared * self.block_size
            k[1, :, :p], v[1, :, :p] = k[0, :, :p], v[0, :, :p]
        return tuple(t.to(self.torch_dtype).to(device) for t in (q, k, v))

    def garbage_cache(self, device="cpu"):
        """(k_cache, v_cache) of ``slots`` slots holding random values (what a reused buffer holds)."""
        g = self.generator(salt=3)
        kc = torch.randn(self.batch, self.hkv, self.slots, self.E, generator=g)
        vc = torch.randn(self.batch, self.hkv, self.slots, self.Ev, generator=g)
        return kc.to(self.torch_dtype).to(device), vc.to(self.torch_dtype).to(device)

    def rotary_tables(self, device="cpu"):
        """(cos, sin), each (T + slack + 1, rotary_dim / 2) in the input dtype (as FlashAttention's
        tests pass them): angle(p, i) = p * 10000^(-2i / rotary_dim), computed in float64."""
        R = self.rotary_dim
        theta = 10000.0 ** (-2.0 * torch.arange(R // 2, dtype=torch.float64) / R)
        ang = torch.arange(self.total + self.slack + 1, dtype=torch.float64)[:, None] * theta
        return ang.cos().to(self.torch_dtype).to(device), ang.sin().to(self.torch_dtype).to(device)


_HEAD = st.one_of(st.integers(1, 12), st.sampled_from([16, 17, 31, 64]))
_EVEN_HEAD = st.one_of(st.integers(1, 8).map(lambda x: 2 * x), st.sampled_from([16, 32, 64]))


@st.composite
def _heads(draw, gqa: bool = True):
    hkv = draw(st.integers(1, 3))
    return hkv * (draw(st.integers(1, 4)) if gqa else 1), hkv


@st.composite
def decode_configs(draw, dtypes=DTYPE) -> KVCacheConfig:
    """A prefill of P tokens (P = 0: none) then T - P single-token decode steps, T <= 24."""
    T = draw(st.integers(1, 24))
    P = draw(st.integers(0, T - 1))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(SEED), chunks=((P,) if P else ()) + (1,) * (T - P),
                         slack=draw(st.integers(0, 3)))


_CHUNKS = st.lists(st.integers(1, 12), min_size=1, max_size=5).map(tuple)


@st.composite
def chunk_configs(draw, dtypes=DTYPE) -> KVCacheConfig:
    """Any chunk sizes (1 ... 12 tokens each, up to 5 calls)."""
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(SEED), chunks=draw(_CHUNKS), slack=draw(st.integers(0, 3)))


@st.composite
def ragged_configs(draw, dtypes=DTYPE, causal=st.just(True), min_slack: int = 0) -> KVCacheConfig:
    """2 ... 4 batch items whose cached lengths differ (0 ... 24), then one call of 1 ... 8 tokens."""
    B = draw(st.integers(2, 4))
    lengths = draw(st.lists(st.integers(0, 24), min_size=B, max_size=B).filter(lambda x: len(set(x)) > 1))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=B, hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)), dtype=draw(dtypes),
                         seed=draw(SEED), chunks=(draw(st.integers(1, 8)),), lengths=tuple(lengths),
                         slack=draw(st.integers(min_slack, min_slack + 4)), causal=draw(causal))


@st.composite
def window_configs(draw, dtypes=DTYPE) -> KVCacheConfig:
    """A window of 1 ... 12 over a rolling cache of window + 0 ... 3 slots, T up to 40 positions
    (past the cache's size, so it wraps), fed as a prefill and decode steps or in chunks."""
    w = draw(st.integers(1, 12))
    if draw(st.booleans()):
        T = draw(st.integers(w + 1, 40))
        P = draw(st.integers(0, T - 1))
        chunks = ((P,) if P else ()) + (1,) * (T - P)
    else:
        chunks = draw(st.lists(st.integers(1, 12), min_size=2, max_size=6).map(tuple))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(SEED), chunks=chunks, slack=draw(st.integers(0, 3)), window=w)


@st.composite
def chunked_configs(draw, dtypes=DTYPE, ragged: bool = False) -> KVCacheConfig:
    """Chunked local attention, a chunk of 1 ... 12 positions over a linear cache, T up to 40 positions
    (several chunks), fed as a prefill and decode steps or in calls of any sizes; ``ragged``: 2 ... 4
    items with cached lengths that differ (0 ... 30) and one call of 1 ... 8 tokens."""
    c = draw(st.integers(1, 12))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    common = dict(hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)), dtype=draw(dtypes), seed=draw(SEED),
                  slack=draw(st.integers(0, 3)), chunk=c)
    if ragged:
        B = draw(st.integers(2, 4))
        lengths = draw(st.lists(st.integers(0, 30), min_size=B, max_size=B).filter(lambda x: len(set(x)) > 1))
        return KVCacheConfig(batch=B, chunks=(draw(st.integers(1, 8)),), lengths=tuple(lengths), **common)
    if draw(st.booleans()):
        T = draw(st.integers(c + 1, 40))
        P = draw(st.integers(0, T - 1))
        chunks = ((P,) if P else ()) + (1,) * (T - P)
    else:
        chunks = draw(st.lists(st.integers(1, 12), min_size=2, max_size=6).map(tuple))
    return KVCacheConfig(batch=draw(st.integers(1, 2)), chunks=chunks, **common)


@st.composite
def rotary_configs(draw, dtypes=DTYPE) -> KVCacheConfig:
    """RoPE over the first R (even, <= E) dims, either pairing; a prefill and decode steps or chunks."""
    E = draw(_EVEN_HEAD)
    R = draw(st.one_of(st.just(E), st.integers(1, E // 2).map(lambda x: 2 * x)))
    chunks = draw(st.one_of(
        st.integers(1, 20).flatmap(lambda T: st.integers(0, T - 1).map(lambda P: ((P,) if P else ()) + (1,) * (T - P))),
        _CHUNKS))
    hq, hkv = draw(_heads())
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(SEED), chunks=chunks, slack=draw(st.integers(0, 3)),
                         rotary_dim=R, interleaved=draw(st.booleans()))


#: block sizes: the issue's 1, 16 and 256, and small ones (shrinkable, several pages per item)
BLOCK_SIZES = st.one_of(st.sampled_from([1, 16, 256]), st.integers(2, 8))
_CALLS = st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple)
#: softcaps around the scaled scores' size (|scores| ~ 1 .. 4 here), and Gemma 2's 50
_SOFTCAP = st.sampled_from([0.5, 1.0, 2.0, 5.0, 50.0])


@st.composite
def paged_configs(draw, *, dtypes=DTYPE, causal=st.just(True), shared: bool = False, paged=st.just(True),
                  softcap: bool = False, sinks: bool = False) -> KVCacheConfig:
    """1 ... 3 items with cached lengths 0 ... 40 (ragged), then 1 ... 3 calls of 1 ... 6 tokens
    each, over a paged pool (block sizes 1, 16, 256 and 2 ... 8: the last page partly filled)
    with 0 ... 2 spare pages; ``shared``: items 0 and 1 share 1 ... 3 whole pages of a common
    prefix (both cached past it); ``paged``: whether the cache is paged (else linear);
    ``softcap``/``sinks``: the kernel options drawn."""
    bs = draw(st.one_of(st.sampled_from([1, 16]), st.integers(2, 8)) if shared else BLOCK_SIZES)
    B = draw(st.integers(2, 3) if shared else st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, 40), min_size=B, max_size=B))
    pages = draw(st.integers(1, 3)) if shared else 0
    if shared:
        lengths[:2] = [pages * bs + draw(st.integers(0, 8)) for _ in range(2)]
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=B, hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)), dtype=draw(dtypes),
                         seed=draw(SEED), chunks=draw(_CALLS), lengths=tuple(lengths), slack=draw(st.integers(0, 3)),
                         causal=draw(causal), block_size=bs if draw(paged) else 0, spare=draw(st.integers(0, 2)),
                         shared=pages, softcap=draw(_SOFTCAP) if softcap else 0.0, sinks=sinks)


# -- the tile-boundary regime (suites.regimes): run first as explicit examples ------------------
def _kv(chunks, *, E=64, Ev=None, hq=1, hkv=1, dtype="float32", seed=90, **kw) -> KVCacheConfig:
    return KVCacheConfig(batch=kw.pop("batch", 1), hq=hq, hkv=hkv, E=E, Ev=E if Ev is None else Ev, dtype=dtype,
                         seed=seed, chunks=tuple(chunks), **kw)


_G8, _MQA = GQA_HEADS[3], GQA_HEADS[5]  # (16, 2): groups of 8; (6, 1): MQA

#: a long prefill, then decode steps across the 128 / 256 / 1024 boundaries; head dims past 128
DECODE = (
    _kv((127, 1, 1, 1), E=64, seed=90),
    _kv((255, 1, 1), E=128, hq=4, hkv=2, dtype="bfloat16", seed=91),
    _kv((1023, 1, 1, 1), E=40, slack=1, seed=92),
    _kv((64, 1), E=256, Ev=192, hq=_MQA[0], hkv=_MQA[1], dtype="float16", seed=93),
)
#: chunks that end just below, at and past a tile, odd ones, and groups of 8
CHUNKS = (
    _kv((63, 65, 1, 127, 1), E=32, seed=94),
    _kv((1, 128, 129), E=160, Ev=96, seed=95),
    _kv((257, 2), E=16, hq=_G8[0], hkv=_G8[1], seed=96),
    _kv((203, 113), E=80, dtype="bfloat16", seed=97),
)
#: cached lengths that differ by a tile within one batch
RAGGED = (
    _kv((1,), E=64, batch=3, lengths=(0, 127, 1023), seed=98),
    _kv((3,), E=128, hq=8, hkv=2, batch=3, lengths=(255, 1, 511), dtype="bfloat16", seed=99),
    _kv((2,), E=111, batch=3, lengths=(63, 64, 65), slack=1, seed=100),
)
#: many poisoned slots past the filled part, past a tile
POISON = (
    _kv((1,), E=64, batch=3, lengths=(0, 129, 255), slack=200, seed=101),
    _kv((2,), E=32, batch=2, lengths=(127, 128), slack=129, dtype="bfloat16", seed=102, causal=False),
)
#: windows below, at and past a tile over rolling caches that wrap several times
WINDOW = (
    _kv((100, 30, 1, 1), E=32, window=64, seed=103),
    _kv((127, 1, 1, 1, 64, 1), E=64, window=128, slack=2, seed=104),
    _kv((255, 1, 1, 300, 1), E=16, window=256, hq=8, hkv=2, dtype="bfloat16", seed=105),
    _kv((129,) + (1,) * 8, E=16, window=63, seed=106),
)
#: RoPE past a tile of positions and of head dims, partial rotary, both pairings
ROTARY = (
    _kv((127, 1, 1), E=128, rotary_dim=128, dtype="bfloat16", seed=107),
    _kv((255, 2, 1), E=160, rotary_dim=64, hq=4, hkv=2, interleaved=True, seed=108),
    _kv((511, 1, 1), E=256, rotary_dim=256, seed=109),
)
#: pages of 256 around a page and a tile boundary, of 16 across tiles (GQA, bfloat16), of 1 token
PAGED = (
    _kv((1,), E=64, batch=3, lengths=(0, 255, 257), block_size=256, seed=110),
    _kv((63, 1, 1), E=128, hq=4, hkv=2, batch=2, lengths=(1, 64), block_size=16, dtype="bfloat16", seed=111),
    _kv((5, 1), E=32, batch=2, lengths=(40, 3), block_size=1, spare=3, seed=112),
)
#: a shared prefix of 64 and of 256 positions (whole pages), the items cached past it
SHARED = (
    _kv((1, 1), E=64, batch=2, lengths=(64, 70), block_size=16, shared=4, seed=113),
    _kv((2,), E=32, batch=3, lengths=(256, 300, 5), block_size=256, shared=1, dtype="bfloat16", seed=114),
)
#: a softcap of 1 over a call of 7 queries (masked keys inside the call), Gemma 2's 50 on pages
SOFTCAP = (
    _kv((7, 1), E=64, lengths=(3,), softcap=1.0, seed=115),
    _kv((3,), E=32, batch=2, lengths=(20, 130), block_size=16, softcap=50.0, dtype="bfloat16", seed=116),
)
#: sinks with GQA (one per query head) over a linear cache, and over pages across a tile
SINKS = (
    _kv((7, 1), E=64, hq=4, hkv=2, lengths=(3,), sinks=True, seed=117),
    _kv((2,), E=32, batch=2, lengths=(130, 5), block_size=16, sinks=True, causal=False, seed=118),
)
#: non-causal calls over the partly filled last pages of 256 and 16 (+-1e4 past the filled slots)
PAGED_UNFILLED = (
    _kv((2,), E=64, batch=3, lengths=(0, 255, 100), block_size=256, causal=False, seed=119),
    _kv((3,), E=32, batch=2, lengths=(17, 5), block_size=16, spare=2, causal=False, dtype="float16", seed=120),
)
