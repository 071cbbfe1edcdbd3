"""The attention family's configurations (``suites/attention/``): sizes, dtype and a seed.

query (*batch, hq, L, E); key (*batch, hkv, S, E); value (*batch, hkv, S, Ev). The tensors are
rebuilt from the seed (``AttnConfig.qkv``), so a shrunk counterexample replays exactly.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st

from harness.suites.strategies import DTYPE, SEED
from harness.spec.configs import Config, register


@register
@dataclass(frozen=True)
class AttnConfig(Config):
    """query (*batch, hq, L, E); key (*batch, hkv, S, E); value (*batch, hkv, S, Ev)."""

    batch: tuple[int, ...]
    hq: int
    hkv: int
    L: int
    S: int
    E: int
    Ev: int
    dtype: str
    seed: int

    @property
    def group(self) -> int:
        return self.hq // self.hkv

    @property
    def gqa(self) -> bool:
        return self.hq != self.hkv

    def qkv(self, device="cpu", std: float = 1.0):
        """Random query, key, value in the configured dtype (drawn in float32 from the seed)."""
        g = self.generator()
        shape = lambda h, n, e: (*self.batch, h, n, e)  # noqa: E731
        q = torch.randn(shape(self.hq, self.L, self.E), generator=g) * std
        k = torch.randn(shape(self.hkv, self.S, self.E), generator=g) * std
        v = torch.randn(shape(self.hkv, self.S, self.Ev), generator=g)
        return tuple(t.to(self.torch_dtype).to(device) for t in (q, k, v))

    def out_shape(self) -> tuple[int, ...]:
        return (*self.batch, self.hq, self.L, self.Ev)


@register
@dataclass(frozen=True)
class WindowConfig(AttnConfig):
    """An attention config with a window; L <= S (queries aligned to the end)."""

    window: int = 1


@register
@dataclass(frozen=True)
class ChunkConfig(AttnConfig):
    """An attention config with a chunk size (``chunked_attention``); L <= S (queries aligned to the end)."""

    chunk: int = 1


@register
@dataclass(frozen=True)
class SdpaOptionsConfig(AttnConfig):
    """SDPA's options drawn together (``suites/attention/test_options_together.py``): ``mask`` is
    "none", "bool" (L, S), "bool_heads" (*batch, Hq, L, S) or "float" (L, S), drawn from the seed."""

    causal: bool = False
    mask: str = "none"
    scale: float | None = None


@register
@dataclass(frozen=True)
class WindowOptionsConfig(WindowConfig):
    """``sliding_window_attention``'s options drawn together: a window and an explicit scale (or None)."""

    scale: float | None = None


@register
@dataclass(frozen=True)
class DropoutConfig(AttnConfig):
    """An attention config with ``dropout_p`` > 0 (the dropout suite's probe: L, S >= 16)."""

    dropout_p: float = 0.5


#: sizes worth drawing: 1, odd sizes, and sizes around 8/16 tile boundaries
_SEQ = st.one_of(st.integers(1, 24), st.sampled_from([31, 33, 40]))
_HEAD_DIM = st.one_of(st.integers(1, 12), st.sampled_from([16, 17, 31, 64]))
_BATCH = st.one_of(st.tuples(st.integers(1, 3)), st.tuples(st.integers(1, 2), st.integers(1, 2)))




@st.composite
def attn_configs(draw, min_group: int = 1, max_kv_heads: int = 3, dtypes=DTYPE,
                 distinct_lengths: bool = False, gqa: bool = False) -> AttnConfig:
    """Small-regime attention configs (``suites.regimes`` adds the tile-boundary one). Hq = Hkv
    unless ``gqa`` or ``min_group`` > 1: a property that is not about GQA does not draw it, so a
    GQA bug fails the property that names it, not every property."""
    hkv = draw(st.integers(1, max_kv_heads))
    group = draw(st.integers(min_group, max(min_group, 3))) if (gqa or min_group > 1) else 1
    L = draw(_SEQ)
    S = draw(_SEQ.filter(lambda s: s != L) if distinct_lengths else _SEQ)
    E = draw(_HEAD_DIM)
    Ev = draw(st.one_of(st.just(E), _HEAD_DIM))
    return AttnConfig(batch=draw(_BATCH), hq=hkv * group, hkv=hkv, L=L, S=S, E=E, Ev=Ev,
                      dtype=draw(dtypes), seed=draw(SEED))


@st.composite
def window_configs(draw, dtypes=DTYPE) -> WindowConfig:
    S = draw(_SEQ)
    L = draw(st.integers(1, S))
    E = draw(_HEAD_DIM)
    window = draw(st.one_of(st.just(1), st.integers(1, S + 2)))
    h = draw(st.integers(1, 3))
    return WindowConfig(batch=draw(_BATCH), hq=h, hkv=h, L=L, S=S, E=E, Ev=draw(st.one_of(st.just(E), _HEAD_DIM)),
                        dtype=draw(dtypes), seed=draw(SEED), window=window)


@st.composite
def chunk_configs(draw, dtypes=DTYPE) -> ChunkConfig:
    """Keys spanning one chunk or several (a chunk of 1, of 2 .. S, and past S), queries from one decoding
    step to every key: so some queries start a chunk and some sit past a chunk boundary."""
    S = draw(_SEQ)
    L = draw(st.one_of(st.just(1), st.just(S), st.integers(1, S)))
    E = draw(_HEAD_DIM)
    chunk = draw(st.one_of(st.just(1), st.integers(2, max(2, S)), st.sampled_from([4, 8, 16]), st.just(S + 3)))
    h = draw(st.integers(1, 3))
    return ChunkConfig(batch=draw(_BATCH), hq=h, hkv=h, L=L, S=S, E=E, Ev=draw(st.one_of(st.just(E), _HEAD_DIM)),
                       dtype=draw(dtypes), seed=draw(SEED), chunk=chunk)


@st.composite
def dropout_configs(draw, dtypes=DTYPE) -> DropoutConfig:
    """Batch 2, 2-3 heads, L and S in 16..48 (>= 256 weights per head and batch item, the bound
    in suites/attention/test_attention_dropout.py), p in [0.2, 0.7]."""
    h = draw(st.integers(2, 3))
    return DropoutConfig(batch=(2,), hq=h, hkv=h, L=draw(st.integers(16, 48)), S=draw(st.integers(16, 48)),
                         E=draw(st.integers(1, 16)), Ev=1, dtype=draw(dtypes), seed=draw(SEED),
                         dropout_p=draw(st.sampled_from([0.5, 0.2, 0.3, 0.7])))


@register
@dataclass(frozen=True)
class VarlenConfig(Config):
    """Packed sequences (``attention_varlen``): sequence b has ``q_lens[b]`` queries and ``k_lens[b]``
    keys; q (sum(q_lens), hq, E), k (sum(k_lens), hkv, E), v (sum(k_lens), hkv, Ev). ``window`` 0:
    none; ``softcap`` 0: none; ``sinks``: one drawn logit per query head; ``chunk`` 0: none."""

    q_lens: tuple[int, ...]
    k_lens: tuple[int, ...]
    hq: int
    hkv: int
    E: int
    Ev: int
    dtype: str
    seed: int
    causal: bool = False
    window: int = 0
    softcap: float = 0.0
    sinks: bool = False
    chunk: int = 0

    @property
    def total_q(self) -> int:
        return sum(self.q_lens)

    @property
    def total_k(self) -> int:
        return sum(self.k_lens)

    def cu_seqlens(self, device="cpu"):
        """(cu_seqlens_q, cu_seqlens_k), each (B + 1,) int32."""
        def cu(lens):
            return torch.tensor([0, *itertools.accumulate(lens)], dtype=torch.int32, device=device)
        return cu(self.q_lens), cu(self.k_lens)

    def qkv(self, device="cpu"):
        """Random packed q, k, v in the configured dtype (drawn in float32 from the seed)."""
        g = self.generator()
        q = torch.randn(self.total_q, self.hq, self.E, generator=g)
        k = torch.randn(self.total_k, self.hkv, self.E, generator=g)
        v = torch.randn(self.total_k, self.hkv, self.Ev, generator=g)
        return tuple(t.to(self.torch_dtype).to(device) for t in (q, k, v))

    def sink_logits(self, device="cpu"):
        """(hq,) logits N(0, 2^2), in the configured dtype: some heads' sinks outweigh their keys."""
        return (2 * torch.randn(self.hq, generator=self.generator(salt=5))).to(self.torch_dtype).to(device)

    def out_shape(self) -> tuple[int, ...]:
        return (self.total_q, self.hq, self.Ev)


_VLEN = st.one_of(st.integers(1, 24), st.sampled_from([31, 33, 40]))


@st.composite
def varlen_configs(draw, *, causal=st.booleans(), gqa: bool = False, dtypes=DTYPE, lengths=None,
                   distinct: bool = False, even_head: bool = False, max_batch: int = 4) -> VarlenConfig:
    """1 ... ``max_batch`` sequences of 1 ... 40 queries (``lengths``: a strategy of (q_lens, k_lens)
    instead). Causal: the keys as many as the queries unless ``distinct`` (Lq != Lk in some
    sequence, both ways); non-causal: other key lengths half the time. Hq = Hkv unless ``gqa``."""
    is_causal = draw(causal)
    if lengths is not None:
        q_lens, k_lens = draw(lengths)
    else:
        B = draw(st.integers(2 if distinct else 1, max_batch))
        q_lens = tuple(draw(st.lists(_VLEN, min_size=B, max_size=B)))
        if distinct or (not is_causal and draw(st.booleans())):
            k_lens = tuple(draw(st.lists(_VLEN, min_size=B, max_size=B)))
            if distinct and k_lens == q_lens:
                k_lens = (q_lens[0] + draw(st.integers(1, 8)),) + k_lens[1:]
        else:
            k_lens = q_lens
    hkv = draw(st.integers(1, 3))
    group = draw(st.integers(2, 4)) if gqa else 1
    E = draw(_EVEN_HEAD if even_head else _HEAD_DIM)
    Ev = draw(st.one_of(st.just(E), _HEAD_DIM))
    return VarlenConfig(q_lens=tuple(q_lens), k_lens=tuple(k_lens), hq=hkv * group, hkv=hkv, E=E, Ev=Ev,
                        dtype=draw(dtypes), seed=draw(SEED), causal=is_causal)


_EVEN_HEAD = st.one_of(st.integers(1, 8).map(lambda x: 2 * x), st.sampled_from([16, 32, 64]))


@st.composite
def chunked_varlen_configs(draw, dtypes=DTYPE) -> VarlenConfig:
    """Chunked local attention over 2 .. 4 packed documents (causal, bottom-right): a chunk of 1, 2 .. 12
    or 16, documents of 1 .. 40 tokens, so most documents start at a packed row that is no multiple
    of the chunk (their chunks restart there), queries as many as the keys or a decoding tail."""
    B = draw(st.integers(2, 4))
    k_lens = tuple(draw(st.lists(_VLEN, min_size=B, max_size=B)))
    q_lens = tuple(k if draw(st.booleans()) else draw(st.integers(1, k)) for k in k_lens)
    cfg = draw(varlen_configs(causal=st.just(True), dtypes=dtypes, lengths=st.just((q_lens, k_lens))))
    return replace(cfg, chunk=draw(st.one_of(st.just(1), st.integers(2, 12), st.just(16))))


def equal_lengths(batches: tuple[int, int], max_len: int) -> st.SearchStrategy:
    """(q_lens, k_lens), equal: ``batches`` (lo, hi) sequences of 1 ... ``max_len`` tokens."""
    return st.integers(*batches).flatmap(lambda B: st.lists(st.integers(1, max_len), min_size=B, max_size=B)).map(
        lambda x: (tuple(x), tuple(x)))


@st.composite
def zero_lengths(draw):
    """2 ... 5 sequences, at least one of zero length anywhere (queries, keys or both)."""
    B = draw(st.integers(2, 5))
    lens = [draw(st.integers(1, 20)) for _ in range(B)]
    q_lens, k_lens = list(lens), list(lens)
    for b in draw(st.lists(st.integers(0, B - 1), min_size=1, max_size=B - 1, unique=True)):
        which = draw(st.sampled_from(["both", "both", "q", "k"]))
        if which in ("both", "q"):
            q_lens[b] = 0
        if which in ("both", "k"):
            k_lens[b] = 0
    return tuple(q_lens), tuple(k_lens)


@st.composite
def tile_offsets(draw):
    """A first sequence of 0 ... 129 tokens (the offset within a tile at which the next starts), then
    1 ... 3 sequences of 1 ... 70 tokens: joins at every offset within a 64- or 128-row tile."""
    lens = [draw(st.integers(0, 129))] + draw(st.lists(st.integers(1, 70), min_size=1, max_size=3))
    return tuple(lens), tuple(lens)
