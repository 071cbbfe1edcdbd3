"""The attention family's configurations (``suites/attention/``): sizes, dtype and a seed.

query (*batch, hq, L, E); key (*batch, hkv, S, E); value (*batch, hkv, S, Ev). The tensors are
rebuilt from the seed (``AttnConfig.qkv``), so a shrunk counterexample replays exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.configs import _DTYPE, _SEED, Config, register


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
class DropoutConfig(AttnConfig):
    """An attention config with ``dropout_p`` > 0 (the dropout suite's probe: L, S >= 16)."""

    dropout_p: float = 0.5


#: sizes worth drawing: 1, odd sizes, and sizes around 8/16 tile boundaries
_SEQ = st.one_of(st.integers(1, 24), st.sampled_from([31, 33, 40]))
_HEAD_DIM = st.one_of(st.integers(1, 12), st.sampled_from([16, 17, 31, 64]))
_BATCH = st.one_of(st.tuples(st.integers(1, 3)), st.tuples(st.integers(1, 2), st.integers(1, 2)))




@st.composite
def attn_configs(draw, min_group: int = 1, max_kv_heads: int = 3, dtypes=_DTYPE,
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
                      dtype=draw(dtypes), seed=draw(_SEED))


@st.composite
def window_configs(draw, dtypes=_DTYPE) -> WindowConfig:
    S = draw(_SEQ)
    L = draw(st.integers(1, S))
    E = draw(_HEAD_DIM)
    window = draw(st.one_of(st.just(1), st.integers(1, S + 2)))
    h = draw(st.integers(1, 3))
    return WindowConfig(batch=draw(_BATCH), hq=h, hkv=h, L=L, S=S, E=E, Ev=draw(st.one_of(st.just(E), _HEAD_DIM)),
                        dtype=draw(dtypes), seed=draw(_SEED), window=window)


@st.composite
def dropout_configs(draw, dtypes=_DTYPE) -> DropoutConfig:
    """Batch 2, 2-3 heads, L and S in 16..48 (>= 256 weights per head and batch item, the bound
    in suites/attention/test_attention_dropout.py), p in [0.2, 0.7]."""
    h = draw(st.integers(2, 3))
    return DropoutConfig(batch=(2,), hq=h, hkv=h, L=draw(st.integers(16, 48)), S=draw(st.integers(16, 48)),
                         E=draw(st.integers(1, 16)), Ev=1, dtype=draw(dtypes), seed=draw(_SEED),
                         dropout_p=draw(st.sampled_from([0.5, 0.2, 0.3, 0.7])))
