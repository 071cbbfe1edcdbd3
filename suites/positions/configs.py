"""Configurations for the position-encoding suites (sinusoidal, learned, RoPE, ALiBi, T5 buckets).

As in ``harness.spec.configs``: the suites draw a configuration (sizes, dtype, base,
position offsets, seed) and rebuild every tensor from the seed, so a shrunk
counterexample is a handful of numbers that ``python -m harness repro`` replays.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.suites.strategies import DTYPE, SEED
from harness.spec.configs import DTYPES, Config, register

#: RoPE position limit of the long-context property ("64k")
LONG_CONTEXT = 65536


@register
@dataclass(frozen=True)
class RopeConfig(Config):
    """x (batch, heads, L, D); positions (L,) or (batch, L) when ``per_batch``.

    Positions are ``offset + arange(L)`` when ``spread`` is 0, else ``offset`` plus
    L integers drawn from [0, spread) (non-contiguous, repeats allowed, unsorted).
    ``shift`` is the common offset the relative property adds to every position.
    """

    batch: int
    heads: int
    L: int
    D: int
    dtype: str
    base: float
    offset: int
    spread: int
    per_batch: bool
    shift: int
    seed: int

    def x(self, device="cpu", salt: int = 0) -> torch.Tensor:
        g = self.generator(salt)
        x = torch.randn(self.batch, self.heads, self.L, self.D, generator=g)
        return x.to(self.torch_dtype).to(device)

    def positions(self, device="cpu", salt: int = 0) -> torch.Tensor:
        """int64, (L,) or (batch, L)."""
        g = self.generator(100 + salt)
        shape = (self.batch, self.L) if self.per_batch else (self.L,)
        if self.spread == 0:
            pos = torch.arange(self.L).expand(shape).clone()
        else:
            pos = torch.randint(0, self.spread, shape, generator=g)
        return (pos + self.offset).to(device)


@register
@dataclass(frozen=True)
class RopeDecayConfig(Config):
    """RoFormer's long-term decay: head dim D, base, dtype (no random data)."""

    D: int
    base: float
    dtype: str


@register
@dataclass(frozen=True)
class SinusoidalConfig(Config):
    """sinusoidal_position_embedding(num_positions, dim); ``far`` > num_positions is the
    length asked for when checking positions never seen at num_positions."""

    num_positions: int
    dim: int
    far: int


@register
@dataclass(frozen=True)
class LearnedConfig(Config):
    """LearnedPositionEmbedding(max_positions, dim); positions (L,) or (batch, L) in range."""

    max_positions: int
    dim: int
    batch: int
    L: int
    per_batch: bool
    seed: int

    def positions(self, device="cpu", salt: int = 0) -> torch.Tensor:
        g = self.generator(salt)
        shape = (self.batch, self.L) if self.per_batch else (self.L,)
        pos = torch.randint(0, self.max_positions, shape, generator=g)
        pos.view(-1)[-1] = self.max_positions - 1  # the last row is always looked up
        return pos.to(device)

    def table(self, salt: int = 7) -> torch.Tensor:
        """A random table (max_positions, dim) in float32, written into the module's weight."""
        return torch.randn(self.max_positions, self.dim, generator=self.generator(salt))


@register
@dataclass(frozen=True)
class AlibiConfig(Config):
    """alibi_bias(heads, Lq, Lk) with Lq <= Lk (queries aligned to the end of the keys)."""

    heads: int
    Lq: int
    Lk: int


@register
@dataclass(frozen=True)
class AlibiShardConfig(Config):
    """A ``heads``-head model's ALiBi split over ``tp`` tensor-parallel ranks (``tp`` divides ``heads``;
    rank r holds heads r * heads / tp ..), and one more contiguous ``shard`` (h0, h1) of any size
    (an uneven split); the bias is (Lq, Lk) with Lq <= Lk."""

    heads: int
    tp: int
    shard: tuple[int, int]
    Lq: int
    Lk: int

    def shards(self) -> list[tuple[int, int]]:
        """Every rank's (h0, h1), then the drawn one."""
        n = self.heads // self.tp
        return [(r * n, (r + 1) * n) for r in range(self.tp)] + [self.shard]


@register
@dataclass(frozen=True)
class T5BucketConfig(Config):
    """Buckets for a (Lq, Lk) grid: queries at positions query_offset + i, keys at j,
    relative_position = j - (query_offset + i)."""

    num_buckets: int
    max_distance: int
    bidirectional: bool
    Lq: int
    Lk: int
    query_offset: int
    seed: int

    def relative_positions(self, device="cpu") -> torch.Tensor:
        q = torch.arange(self.Lq) + self.query_offset
        return (torch.arange(self.Lk)[None, :] - q[:, None]).to(device)  # (Lq, Lk)


#: even head dims from 4: one pair (D = 2) is no RoPE anyone uses, both layouts coincide there,
#: and x-transformers' RotaryEmbedding divides by D - 2
EVEN_DIM = st.one_of(st.integers(2, 8).map(lambda n: 2 * n), st.sampled_from([16, 32, 64, 128]))
_SIN_DIM = st.one_of(st.integers(1, 8).map(lambda n: 2 * n), st.sampled_from([16, 32, 64, 128]))
_SEQ = st.one_of(st.integers(1, 24), st.sampled_from([31, 40]))
#: 10^4 (the paper), 5*10^5 (Llama 3), 10^6, small bases with fast-turning pairs, arbitrary floats
BASE = st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 100.0, 10.0]), st.floats(2.0, 1e6))
_OFFSET = st.one_of(st.just(0), st.integers(1, 5000), st.integers(10_000, 60_000))
_SPREAD = st.sampled_from([0, 8, 100, 4096])


@st.composite
def rope_configs(draw, dtypes=DTYPE, long_context: bool = False) -> RopeConfig:
    """Ordinary configs: offsets 0 .. 60000, shifts 0 .. 60000 (>= 10^4 often).
    ``long_context``: every position within the last 8192 below 65536."""
    L, spread = draw(_SEQ), draw(_SPREAD)
    if long_context:
        top = LONG_CONTEXT - max(L, spread)
        offset = top - draw(st.one_of(st.just(0), st.integers(0, 8192 - max(L, spread))))
    else:
        offset = draw(_OFFSET)
    return RopeConfig(batch=draw(st.integers(1, 3)), heads=draw(st.integers(1, 3)), L=L, D=draw(EVEN_DIM),
                      dtype=draw(dtypes), base=draw(BASE), offset=offset, spread=spread,
                      per_batch=draw(st.booleans()), shift=draw(_OFFSET), seed=draw(SEED))


#: the bound decays over r < 4096 by >= 4 % per 4x window for every even D >= 32 and these
#: bases (checked in float64 for D = 32 .. 256); smaller D or bases oscillate
DECAY_BASES = (1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6)


@st.composite
def rope_decay_configs(draw, dtypes=DTYPE) -> RopeDecayConfig:
    D = draw(st.one_of(st.sampled_from([32, 64, 128]), st.integers(16, 64).map(lambda n: 2 * n)))
    return RopeDecayConfig(D=D, base=draw(st.sampled_from(DECAY_BASES)), dtype=draw(dtypes))


@st.composite
def sinusoidal_configs(draw) -> SinusoidalConfig:
    N = draw(st.one_of(st.integers(1, 24), st.sampled_from([33, 64])))
    far = draw(st.sampled_from([1025, 2048]))
    return SinusoidalConfig(num_positions=N, dim=draw(_SIN_DIM), far=far)


@st.composite
def learned_configs(draw) -> LearnedConfig:
    return LearnedConfig(max_positions=draw(st.one_of(st.integers(1, 40), st.sampled_from([512, 1024]))),
                         dim=draw(st.integers(1, 16)), batch=draw(st.integers(1, 3)), L=draw(_SEQ),
                         per_batch=draw(st.booleans()), seed=draw(SEED))


#: the head counts the ALiBi paper's get_slopes is checked for (non-powers of two interleave)
ALIBI_HEADS = (1, 2, 4, 5, 6, 8, 12, 16, 20)


@st.composite
def alibi_configs(draw, distinct_lengths: bool = False, min_keys: int = 1, square: bool = False) -> AlibiConfig:
    Lk = max(draw(st.one_of(st.integers(1, 24), st.sampled_from([40, 64]))), min_keys)
    if distinct_lengths:
        Lk = max(Lk, 2)
        Lq = draw(st.integers(1, Lk - 1))
    elif square:
        Lq = Lk
    else:
        Lq = draw(st.integers(1, Lk))
    heads = draw(st.one_of(st.sampled_from(ALIBI_HEADS), st.integers(1, 40)))
    return AlibiConfig(heads=heads, Lq=Lq, Lk=Lk)


#: model head counts a tensor-parallel ALiBi model has (BLOOM-176B: 112 heads over 8 or 16 ranks, MPT:
#: 32-64), and non-powers of two, whose later slopes interleave the next power's
ALIBI_SHARD_HEADS = (6, 8, 12, 16, 20, 24, 32, 40, 48, 64, 96, 112)


@st.composite
def alibi_shard_configs(draw) -> AlibiShardConfig:
    heads = draw(st.one_of(st.sampled_from(ALIBI_SHARD_HEADS), st.integers(2, 40)))
    tp = draw(st.sampled_from([d for d in range(2, heads + 1) if heads % d == 0]))
    h0 = draw(st.integers(0, heads - 1))
    h1 = draw(st.integers(h0 + 1, heads))
    Lk = draw(st.integers(1, 24))
    return AlibiShardConfig(heads=heads, tp=tp, shard=(h0, h1), Lq=draw(st.integers(1, Lk)), Lk=Lk)


#: (num_buckets, max_distance): T5's (32, 128), and sizes where the halves and the
#: logarithmic range are small enough to see every boundary
T5_NUM_BUCKETS = (4, 6, 8, 10, 16, 20, 32, 33, 64, 128)
T5_MAX_DISTANCE = (8, 16, 20, 64, 100, 128, 256, 1000)


@st.composite
def t5_bucket_configs(draw, bidirectional=st.booleans()) -> T5BucketConfig:
    nb = draw(st.sampled_from(T5_NUM_BUCKETS))
    md = draw(st.sampled_from([d for d in T5_MAX_DISTANCE if d > nb // 2]))
    return T5BucketConfig(num_buckets=nb, max_distance=md, bidirectional=draw(bidirectional),
                          Lq=draw(_SEQ), Lk=draw(_SEQ), query_offset=draw(st.integers(0, 300)),
                          seed=draw(SEED))


@register
@dataclass(frozen=True)
class T5BiasConfig(Config):
    """t5_relative_position_bias(table (num_buckets, heads), Lq, Lk, ...) with Lq <= Lk."""

    heads: int
    num_buckets: int
    max_distance: int
    bidirectional: bool
    Lq: int
    Lk: int
    seed: int

    def table(self, dtype=torch.float32) -> torch.Tensor:
        """A random (num_buckets, heads) table."""
        return torch.randn(self.num_buckets, self.heads, generator=self.generator()).to(dtype)

    def probe_table(self) -> torch.Tensor:
        """(num_buckets, heads) float32 with entry [b, h] = h * num_buckets + b: every value of the
        bias names the bucket and the head (column) it was read from (exact below 2^24)."""
        b = torch.arange(self.num_buckets, dtype=torch.float32)[:, None]
        h = torch.arange(self.heads, dtype=torch.float32)[None, :]
        return h * self.num_buckets + b


@st.composite
def t5_bias_configs(draw, distinct_lengths: bool = False, square: bool = False, min_heads: int = 1) -> T5BiasConfig:
    """Lq < Lk with ``distinct_lengths`` (1 often: one decoding step), Lq = Lk with ``square``."""
    nb = draw(st.sampled_from(T5_NUM_BUCKETS))
    md = draw(st.sampled_from([d for d in T5_MAX_DISTANCE if d > nb // 2]))
    Lk = draw(st.one_of(st.integers(1, 24), st.sampled_from([40, 64, 130])))
    if distinct_lengths:
        Lk = max(Lk, 2)
        Lq = draw(st.one_of(st.just(1), st.integers(1, Lk - 1)))  # 1: one decoding step
    elif square:
        Lq = Lk
    else:
        Lq = draw(st.integers(1, Lk))
    return T5BiasConfig(heads=draw(st.integers(min_heads, 12)), num_buckets=nb, max_distance=md,
                        bidirectional=draw(st.booleans()), Lq=Lq, Lk=Lk, seed=draw(SEED))


# ---- the stateful rotary module: a module built once, then a sequence of calls --------------------
# The state machine in ``suites/positions/test_rope_module.py`` draws the sequence one call at a time;
# the configuration it reports is the whole sequence, as plain numbers and names, so a shrunk
# counterexample is a short list of calls that ``python -m harness repro`` replays on a fresh
# module, call by call.

#: every position a call uses is below this: integers up to 256 are exact in every dtype
#: (bfloat16's 8-bit significand), so a library that builds positions in the input's dtype is
#: not failed here for that (the precision of large positions is rope.long_context's
#: property); cache bugs show at any size
MAX_POSITION = 256


@register
@dataclass(frozen=True)
class RopeCallsConfig(Config):
    """``RotaryEmbedding(D, base)`` built once, then called once per entry of ``calls``:
    ``(L, offset, dtype, device)`` gives ``forward(x, offset)`` with x (batch, heads, L, D) of
    that dtype on that device (the module moved there first when the device changes), x drawn
    from ``seed`` and the call's index."""

    D: int
    base: float
    batch: int
    heads: int
    seed: int
    calls: tuple[tuple[int, int, str, str], ...] = ()

    def __post_init__(self):  # JSON gives lists: calls stay hashable tuples
        object.__setattr__(self, "calls", tuple(tuple(c) for c in self.calls))

    def then(self, L: int, offset: int, dtype: str, device: str) -> "RopeCallsConfig":
        """This sequence with one more call."""
        return RopeCallsConfig(self.D, self.base, self.batch, self.heads, self.seed,
                               self.calls + ((int(L), int(offset), str(dtype), str(device)),))

    def x(self, index: int) -> torch.Tensor:
        """The input of call ``index``: (batch, heads, L, D) in its dtype on its device."""
        L, _, dtype, device = self.calls[index]
        g = self.generator(salt=index)
        return torch.randn(self.batch, self.heads, L, self.D, generator=g).to(DTYPES[dtype]).to(device)

    def positions(self, index: int) -> torch.Tensor:
        """offset .. offset + L - 1 of call ``index``: (L,) int64 on the CPU."""
        L, offset = self.calls[index][:2]
        return torch.arange(L) + offset

    def describe(self, index: int) -> str:
        L, offset, dtype, device = self.calls[index]
        return f"call {index + 1} of {len(self.calls)}: forward(x ({self.batch}, {self.heads}, {L}, {self.D}) " \
               f"{dtype} on {device}, offset={offset})"


# ---- cached bias modules (ALiBi, T5): a module built once, then a sequence of calls ---------------

#: the longest key length a bias-module call uses (cache bugs show at any size)
MAX_KEYS = 96


@register
@dataclass(frozen=True)
class BiasCallsConfig(Config):
    """A cached bias module built once (``AlibiPositionalBias(heads)``, or
    ``T5RelativePositionBias(heads, bidirectional, num_buckets, max_distance)``), then one entry of
    ``calls`` at a time: ``(Lq, Lk, device, table)`` is ``forward(Lq, Lk)`` on ``device`` (the module
    moved there first when it changes), with the learned table (T5) holding version ``table`` of its
    values (written into ``relative_attention_bias.weight`` first when it changes; 0 at the start)."""

    heads: int
    seed: int
    bidirectional: bool = True
    num_buckets: int = 32
    max_distance: int = 128
    calls: tuple[tuple[int, int, str, int], ...] = ()

    def __post_init__(self):  # JSON gives lists: calls stay hashable tuples
        object.__setattr__(self, "calls", tuple(tuple(c) for c in self.calls))

    def then(self, Lq: int, Lk: int, device: str, table: int = 0) -> "BiasCallsConfig":
        """This sequence with one more call."""
        call = (int(Lq), int(Lk), str(device), int(table))
        return BiasCallsConfig(self.heads, self.seed, self.bidirectional, self.num_buckets,
                               self.max_distance, self.calls + (call,))

    def table(self, version: int) -> torch.Tensor:
        """Version ``version`` of the learned (num_buckets, heads) table, float32 (exact in any
        floating dtype a module keeps it in: multiples of 1/8 below 64)."""
        g = self.generator(salt=1000 + version)
        return torch.randint(-256, 256, (self.num_buckets, self.heads), generator=g).float() / 8

    def describe(self, index: int, name: str) -> str:
        Lq, Lk, device, table = self.calls[index]
        version = f", table version {table}" if table else ""
        return f"call {index + 1} of {len(self.calls)}: {name}.forward({Lq}, {Lk}) on {device}{version}"
