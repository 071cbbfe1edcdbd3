"""Configurations for the KV-cache suite (``suites/kvcache/test_kvcache.py``), and its tile-boundary regime.

As in ``harness.configs``: the suites draw sizes, dtype and a seed, and rebuild every tensor from
the seed, so a shrunk counterexample is a handful of integers that ``harness repro`` replays.

A ``KVCacheConfig`` describes a sequence of calls into ``attention_with_kvcache``: batch item b
starts with ``lengths[b]`` positions already cached (written by the harness; all 0 when
``lengths`` is empty) and then feeds the tokens in ``chunks`` (a prefill of 5 and three decode
steps: (5, 1, 1, 1)); the cache has ``max(lengths) + sum(chunks) + slack`` slots, or
``window + slack`` for a rolling cache (``window`` > 0). ``rotary_dim`` > 0: RoPE tables over the
first rotary_dim dims (``interleaved`` pairs or rotate-half).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.configs import _DTYPE, _SEED, Config, register
from suites.regimes import GQA_HEADS


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

    @property
    def prior(self) -> tuple[int, ...]:
        """Positions already cached per batch item before the first call."""
        return self.lengths or (0,) * self.batch

    @property
    def total(self) -> int:
        return max(self.prior) + sum(self.chunks)

    @property
    def slots(self) -> int:
        """Smax: a linear cache holds every position; a rolling one ``window + slack``."""
        return self.window + self.slack if self.window else self.total + self.slack

    def qkv(self, device="cpu"):
        """Random q, k, v over all T positions, in the configured dtype (drawn in float32)."""
        g = self.generator()
        T = self.total
        q = torch.randn(self.batch, self.hq, T, self.E, generator=g)
        k = torch.randn(self.batch, self.hkv, T, self.E, generator=g)
        v = torch.randn(self.batch, self.hkv, T, self.Ev, generator=g)
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
def decode_configs(draw, dtypes=_DTYPE) -> KVCacheConfig:
    """A prefill of P tokens (P = 0: none) then T - P single-token decode steps, T <= 24."""
    T = draw(st.integers(1, 24))
    P = draw(st.integers(0, T - 1))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(_SEED), chunks=((P,) if P else ()) + (1,) * (T - P),
                         slack=draw(st.integers(0, 3)))


_CHUNKS = st.lists(st.integers(1, 12), min_size=1, max_size=5).map(tuple)


@st.composite
def chunk_configs(draw, dtypes=_DTYPE) -> KVCacheConfig:
    """Any chunk sizes (1 ... 12 tokens each, up to 5 calls)."""
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(_SEED), chunks=draw(_CHUNKS), slack=draw(st.integers(0, 3)))


@st.composite
def ragged_configs(draw, dtypes=_DTYPE, causal=st.just(True), min_slack: int = 0) -> KVCacheConfig:
    """2 ... 4 batch items whose cached lengths differ (0 ... 24), then one call of 1 ... 8 tokens."""
    B = draw(st.integers(2, 4))
    lengths = draw(st.lists(st.integers(0, 24), min_size=B, max_size=B).filter(lambda x: len(set(x)) > 1))
    hq, hkv = draw(_heads())
    E = draw(_HEAD)
    return KVCacheConfig(batch=B, hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)), dtype=draw(dtypes),
                         seed=draw(_SEED), chunks=(draw(st.integers(1, 8)),), lengths=tuple(lengths),
                         slack=draw(st.integers(min_slack, min_slack + 4)), causal=draw(causal))


@st.composite
def window_configs(draw, dtypes=_DTYPE) -> KVCacheConfig:
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
                         dtype=draw(dtypes), seed=draw(_SEED), chunks=chunks, slack=draw(st.integers(0, 3)), window=w)


@st.composite
def rotary_configs(draw, dtypes=_DTYPE) -> KVCacheConfig:
    """RoPE over the first R (even, <= E) dims, either pairing; a prefill and decode steps or chunks."""
    E = draw(_EVEN_HEAD)
    R = draw(st.one_of(st.just(E), st.integers(1, E // 2).map(lambda x: 2 * x)))
    chunks = draw(st.one_of(
        st.integers(1, 20).flatmap(lambda T: st.integers(0, T - 1).map(lambda P: ((P,) if P else ()) + (1,) * (T - P))),
        _CHUNKS))
    hq, hkv = draw(_heads())
    return KVCacheConfig(batch=draw(st.integers(1, 2)), hq=hq, hkv=hkv, E=E, Ev=draw(st.one_of(st.just(E), _HEAD)),
                         dtype=draw(dtypes), seed=draw(_SEED), chunks=chunks, slack=draw(st.integers(0, 3)),
                         rotary_dim=R, interleaved=draw(st.booleans()))


# -- the tile-boundary regime (suites.regimes): run first as explicit examples ------------------
def _kv(chunks, E=64, Ev=None, hq=1, hkv=1, dtype="float32", seed=90, **kw) -> KVCacheConfig:
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
