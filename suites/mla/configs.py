"""Configurations for the latent-attention suite (``suites/mla/test_mla.py``).

An ``MLAConfig`` is one call of ``mla_decode``: ``batch`` items, item b with ``lengths[b]`` filled
positions (its last ``lq`` the new tokens: a decoding step, or several with speculative decoding /
multi-token prediction), ``hq`` query heads sharing ``hkv`` latent heads, a latent of ``dc`` dims and a
RoPE part of ``dr`` (D = dc + dr), values the first ``dv`` dims. The linear cache has ``max(lengths) +
slack`` slots; ``block_size`` > 0 lays the same positions out in a paged pool (pages in an order drawn
from the seed, ``spare`` pages no item names). Every tensor is rebuilt from the seed.

An ``AbsorbConfig`` is DeepSeek's attention before absorption: per-head up-projections W_UK (d_nope x
dc) and W_UV (d_v x dc), queries q_nope (d_nope) and q_pe (dr), the latent c_kv and k_pe of each position.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.spec.configs import Config, register
from harness.suites.strategies import DTYPE, SEED


@register
@dataclass(frozen=True)
class MLAConfig(Config):
    """q (batch, lq, hq, dc + dr); kv_cache (batch, slots, hkv, dc + dr); out (batch, lq, hq, dv)."""

    batch: int
    lq: int
    hq: int
    hkv: int
    dc: int
    dr: int
    dv: int
    lengths: tuple[int, ...]
    dtype: str
    seed: int
    causal: bool = True
    slack: int = 0
    block_size: int = 0
    spare: int = 0

    @property
    def D(self) -> int:
        return self.dc + self.dr

    @property
    def slots(self) -> int:
        return max(self.lengths) + self.slack

    @property
    def max_blocks(self) -> int:
        return math.ceil(self.slots / self.block_size)

    @property
    def num_blocks(self) -> int:
        return self.batch * self.max_blocks + self.spare

    def q(self, device="cpu") -> torch.Tensor:
        g = self.generator(salt=1)
        return torch.randn(self.batch, self.lq, self.hq, self.D, generator=g).to(self.torch_dtype).to(device)

    def cache(self, device="cpu") -> torch.Tensor:
        """The linear cache (batch, slots, hkv, D): random values everywhere (the slots past an item's
        length are what a reused buffer holds)."""
        g = self.generator(salt=2)
        return torch.randn(self.batch, self.slots, self.hkv, self.D, generator=g).to(self.torch_dtype).to(device)

    def seqlens(self, device="cpu") -> torch.Tensor:
        return torch.tensor(self.lengths, dtype=torch.int32, device=device)

    def block_table(self, device="cpu") -> torch.Tensor:
        """(batch, max_blocks) int32: the pool's pages handed out in an order drawn from the seed."""
        order = torch.randperm(self.num_blocks, generator=self.generator(salt=5))
        return order[:self.batch * self.max_blocks].reshape(self.batch, self.max_blocks).to(torch.int32).to(device)

    def paged(self, cache: torch.Tensor, table: torch.Tensor, fill: torch.Tensor | None = None) -> torch.Tensor:
        """The pool (num_blocks, block_size, hkv, D) holding ``cache``'s slots through ``table``; the
        spare pages hold ``fill`` (broadcast) or random values."""
        g = self.generator(salt=6)
        pool = torch.randn(self.num_blocks, self.block_size, self.hkv, self.D, generator=g).to(cache.dtype)
        if fill is not None:
            pool[:] = fill
        pool = pool.to(cache.device)
        pos = torch.arange(self.slots)
        for b in range(self.batch):
            blocks = table[b].long().cpu()[pos // self.block_size]
            pool[blocks, pos % self.block_size] = cache[b]
        return pool


_HEADS = st.sampled_from([(1, 1), (2, 1), (4, 1), (8, 1), (16, 1), (3, 1)])
_GQA_HEADS = st.sampled_from([(2, 2), (4, 2), (8, 4), (6, 3), (4, 4)])


@st.composite
def mla_configs(draw, dtypes=DTYPE, *, kv_heads: bool = False, causal=st.booleans(), paged: bool = False,
                slack=st.integers(0, 9)) -> MLAConfig:
    """1 .. 3 items of lengths 1 .. 40 (at least lq: 1 .. 4 new tokens), latent and RoPE parts of any
    size (DeepSeek's 512 + 64 scaled down, odd sizes too), values the whole latent or a prefix of it;
    ``kv_heads``: several latent heads (GQA-style), else one (MQA, DeepSeek's); ``paged``: a block size of
    1, 2 .. 8, 16 or 64 and spare pages."""
    hq, hkv = draw(_GQA_HEADS if kv_heads else _HEADS)
    batch, lq = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    lengths = tuple(draw(st.lists(st.integers(lq, 40), min_size=batch, max_size=batch)))
    dc = draw(st.one_of(st.integers(1, 24), st.sampled_from([32, 64])))
    dr = draw(st.one_of(st.integers(1, 8), st.just(16)))
    dv = draw(st.one_of(st.just(dc), st.integers(1, dc)))
    block = draw(st.one_of(st.sampled_from([1, 16, 64]), st.integers(2, 8))) if paged else 0
    return MLAConfig(batch=batch, lq=lq, hq=hq, hkv=hkv, dc=dc, dr=dr, dv=dv, lengths=lengths,
                     dtype=draw(dtypes), seed=draw(SEED), causal=draw(causal), slack=draw(slack),
                     block_size=block, spare=draw(st.integers(0, 3)) if paged else 0)


@register
@dataclass(frozen=True)
class AbsorbConfig(Config):
    """q_nope (batch, lq, hq, d_nope), q_pe (batch, lq, hq, dr), c_kv (batch, S, dc), k_pe (batch, S, dr),
    w_uk (hq, d_nope, dc), w_uv (hq, d_v, dc); S = max(lengths)."""

    batch: int
    lq: int
    hq: int
    dc: int
    dr: int
    d_nope: int
    d_v: int
    lengths: tuple[int, ...]
    dtype: str
    seed: int

    def tensors(self) -> dict[str, torch.Tensor]:
        """The float64 tensors of DeepSeek's unabsorbed form; W_UK and W_UV scaled by 1/sqrt(dc) (an
        up-projection of unit-variance latents keeps unit-variance keys and values)."""
        g, S = self.generator(salt=11), max(self.lengths)
        r = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
        c_kv = r(self.batch, S, self.dc)
        c_kv = c_kv / c_kv.pow(2).mean(-1, keepdim=True).sqrt()  # the latent is RMS-normalised (kv_a_layernorm)
        return {"q_nope": r(self.batch, self.lq, self.hq, self.d_nope), "q_pe": r(self.batch, self.lq, self.hq, self.dr),
                "c_kv": c_kv, "k_pe": r(self.batch, S, self.dr),
                "w_uk": r(self.hq, self.d_nope, self.dc) / math.sqrt(self.dc),
                "w_uv": r(self.hq, self.d_v, self.dc) / math.sqrt(self.dc)}


@st.composite
def absorb_configs(draw, dtypes=DTYPE) -> AbsorbConfig:
    """DeepSeek's shapes scaled down: a latent wider than a head's key part (dc > d_nope, as 512 > 128)
    or not, a value head of its own size, 1 .. 8 heads, 1 .. 3 new tokens over caches of 1 .. 32."""
    batch, lq = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    return AbsorbConfig(batch=batch, lq=lq, hq=draw(st.integers(1, 8)), dc=draw(st.integers(2, 48)),
                        dr=draw(st.integers(1, 8)), d_nope=draw(st.integers(1, 24)), d_v=draw(st.integers(1, 24)),
                        lengths=tuple(draw(st.lists(st.integers(lq, 32), min_size=batch, max_size=batch))),
                        dtype=draw(dtypes), seed=draw(SEED))
