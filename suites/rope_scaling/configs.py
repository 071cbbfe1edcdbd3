"""Configurations of the scaled-RoPE suite (``rope_frequencies``).

A configuration is the rule and its parameters (Hugging Face's ``rope_parameters`` vocabulary, as
``reference/rope_scaling.py`` describes), the rotated dims, the base and the sequence length of
the call; LongRoPE's per-pair factors are rebuilt from the seed (non-decreasing across pairs, as
the published ones are, so that the frequencies stay ordered).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from hypothesis import strategies as st

from harness.spec.configs import DTYPES, Config, register
from harness.suites.strategies import SEED

#: the rules with a scaling (``default`` is plain RoPE)
RULES = ("linear", "dynamic", "yarn", "llama3", "longrope")


@register
@dataclass(frozen=True)
class RopeScalingConfig(Config):
    """rope_frequencies(dim, base, scaling, seq_len): ``partial`` < 1 is ``partial_rotary_factor`` (the
    rotary dim ``int(dim x partial)``, >= 4 and even); ``seq_len`` 0 is None (not passed); a 0 of
    ``attention_factor``, ``mscale``, ``mscale_all_dim`` leaves the key out of ``scaling``; ``max_pos``
    0 leaves ``max_position_embeddings`` out (else a model config's, which differs from factor x
    original when ``max_pos`` says so: a target must use the explicit factor)."""

    rule: str
    dim: int
    base: float
    factor: float
    orig: int
    seq_len: int
    low_freq_factor: float
    high_freq_factor: float
    beta_fast: float
    beta_slow: float
    mscale: float
    mscale_all_dim: float
    attention_factor: float
    truncate: bool
    max_pos: int
    seed: int
    partial: float = 1.0

    @property
    def rotary_dim(self) -> int:
        """The rotated dims: int(dim x partial_rotary_factor)."""
        return int(self.dim * self.partial)

    def ext_factors(self, salt: int) -> list[float]:
        """LongRoPE's factors (dim/2,), non-decreasing: short ones in [1, 1 + (factor - 1) / 4], long
        ones in [1, 2 factor - 1] (salt 0: short, 1: long)."""
        top = 1 + (self.factor - 1) / 4 if salt == 0 else 1 + 2 * (self.factor - 1)
        u = torch.rand(self.rotary_dim // 2, generator=self.generator(salt), dtype=torch.float64).sort().values
        return [round(1 + (top - 1) * float(x), 6) for x in u]

    def scaling(self) -> dict | None:
        partial = {"partial_rotary_factor": self.partial} if self.partial != 1.0 else {}
        if self.rule == "default":
            return {"rope_type": "default", **partial} if partial else None
        s = {"rope_type": self.rule, "factor": self.factor, "original_max_position_embeddings": self.orig, **partial}
        if self.rule == "llama3":
            s.update(low_freq_factor=self.low_freq_factor, high_freq_factor=self.high_freq_factor)
        if self.rule == "yarn":
            s.update(beta_fast=self.beta_fast, beta_slow=self.beta_slow, truncate=self.truncate)
            if self.mscale and self.mscale_all_dim:
                s.update(mscale=self.mscale, mscale_all_dim=self.mscale_all_dim)
        if self.rule == "longrope":
            s.update(short_factor=self.ext_factors(0), long_factor=self.ext_factors(1))
        if self.rule in ("yarn", "longrope") and self.attention_factor:
            s["attention_factor"] = self.attention_factor
        if self.max_pos and self.rule in ("yarn", "longrope"):
            s["max_position_embeddings"] = self.max_pos
        return s

    def call_seq_len(self) -> int | None:
        return self.seq_len or None


#: head dims that rotate (even, >= 4: the dynamic rule's exponent dim / (dim - 2)), partial ones included
DIM = st.one_of(st.integers(2, 16).map(lambda n: 2 * n), st.sampled_from([64, 96, 128, 256]))
BASE = st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 150000.0]), st.floats(100.0, 2e6))
ORIG = st.one_of(st.sampled_from([2048, 4096, 8192, 32768]), st.integers(64, 65536))
FACTOR = st.one_of(st.sampled_from([2.0, 4.0, 8.0, 16.0, 32.0, 40.0]), st.floats(1.0, 64.0))


@st.composite
def scaling_configs(draw, rules=RULES, factor=FACTOR, long=None, partial=None) -> RopeScalingConfig:
    """A rule of ``rules`` with drawn parameters; ``long``: True draws seq_len past the original
    length, False up to it, None either (or none); ``partial``: True draws a partial rotary factor
    (1/2 or 1/4 of a head dim that is a multiple of 16), False none, None either (1 in 4)."""
    rule = draw(st.sampled_from(rules))
    if partial is None:
        partial = draw(st.sampled_from([False, False, False, True]))
    p = draw(st.sampled_from([0.5, 0.25])) if partial else 1.0
    dim = draw(st.sampled_from([16, 32, 48, 64, 96, 128, 256])) if partial else draw(DIM)
    orig = draw(ORIG)
    f = draw(factor)
    if long is None:
        seq_len = draw(st.one_of(st.just(0), st.integers(1, orig), st.integers(orig + 1, 4 * orig), st.just(orig)))
    elif long:
        seq_len = draw(st.integers(orig + 1, 8 * orig))
    else:
        seq_len = draw(st.one_of(st.just(0), st.integers(1, orig)))
    lo = draw(st.sampled_from([1.0, 0.5, 2.0]))
    mscale = draw(st.sampled_from([0.0, 0.0, 1.0, 0.707]))
    return RopeScalingConfig(
        rule=rule, dim=dim, base=draw(BASE), factor=f, orig=orig, seq_len=seq_len,
        low_freq_factor=lo, high_freq_factor=lo * draw(st.sampled_from([4.0, 2.0, 8.0])),
        beta_fast=draw(st.sampled_from([32.0, 16.0, 64.0])), beta_slow=draw(st.sampled_from([1.0, 2.0, 0.5])),
        mscale=mscale, mscale_all_dim=draw(st.sampled_from([0.0, 1.0, 0.707])) if mscale else 0.0,
        attention_factor=draw(st.sampled_from([0.0, 0.0, 0.0, 1.2])), truncate=draw(st.booleans()),
        max_pos=draw(st.sampled_from([0, 0, orig * 3 + 1])), seed=draw(SEED), partial=p)


def at_factor_one(cfg: RopeScalingConfig) -> RopeScalingConfig:
    """The same rule at factor 1 (LongRoPE: every per-pair factor 1 too), no explicit attention factor."""
    return replace(cfg, factor=1.0, attention_factor=0.0)


def whole(cfg: RopeScalingConfig) -> RopeScalingConfig:
    """The same call over a head dim that is the rotary dim (no partial factor)."""
    return replace(cfg, dim=cfg.rotary_dim, partial=1.0)


# ---- the stateful scaled rotary module: a module built once, then a sequence of calls ---------------

@register
@dataclass(frozen=True)
class ScaledRopeCallsConfig(RopeScalingConfig):
    """``ScaledRotaryEmbedding(dim, base, scaling)`` built once (the rule's fields as above; ``seq_len``
    and ``max_pos`` unused: 0), then called once per entry of ``calls``: ``(L, offset, dtype, device)``
    gives ``forward(x, positions)`` with x (batch, heads, L, dim) of that dtype on that device and
    positions offset .. offset + L - 1 (a call's length for the rule: offset + L); x is drawn from
    ``seed`` and the call's index."""

    batch: int = 1
    heads: int = 1
    calls: tuple[tuple[int, int, str, str], ...] = ()

    def __post_init__(self):  # JSON gives lists: calls stay hashable tuples
        object.__setattr__(self, "calls", tuple(tuple(c) for c in self.calls))

    def then(self, L: int, offset: int, dtype: str, device: str) -> "ScaledRopeCallsConfig":
        """This sequence with one more call."""
        return replace(self, calls=self.calls + ((int(L), int(offset), str(dtype), str(device)),))

    def x(self, index: int) -> torch.Tensor:
        """The input of call ``index``: (batch, heads, L, dim) in its dtype on its device."""
        L, _, dtype, device = self.calls[index]
        g = self.generator(salt=100 + index)
        return torch.randn(self.batch, self.heads, L, self.dim, generator=g).to(DTYPES[dtype]).to(device)

    def positions(self, index: int) -> torch.Tensor:
        """offset .. offset + L - 1 of call ``index``: (L,) int64 on the CPU."""
        L, offset = self.calls[index][:2]
        return torch.arange(L) + offset

    @property
    def dtype(self) -> str | None:
        """The dtype of a one-call configuration (what a target's declared dtypes rule in or out; a
        sequence's calls are drawn from the declared dtypes)."""
        return self.calls[0][2] if len(self.calls) == 1 else None

    def lengths(self, upto: int) -> list[int]:
        """Each call's length for the rule (max position + 1), calls 0 .. ``upto``."""
        return [c[0] + c[1] for c in self.calls[: upto + 1]]

    @property
    def max_position(self) -> int:
        """Every position a call uses is below this: four times the original length, plus a margin."""
        return 4 * self.orig + 64

    def constructed(self) -> str:
        return f"ScaledRotaryEmbedding({self.dim}, base={self.base:g}, scaling={self.scaling()})"

    def describe(self, index: int) -> str:
        L, offset, dtype, device = self.calls[index]
        return (f"call {index + 1} of {len(self.calls)}: forward(x ({self.batch}, {self.heads}, {L}, {self.dim}) "
                f"{dtype} on {device}, positions {offset}..{offset + L - 1}) of {self.constructed()}")


#: original lengths of the module's configurations: small, so that positions past them stay exact
#: and cheap (every rule's formula is the same at any length)
MODULE_ORIG = st.one_of(st.sampled_from([16, 32, 64, 100, 128, 256]), st.integers(8, 256))


@st.composite
def module_configs(draw, rules=("default",) + RULES, partial=None) -> ScaledRopeCallsConfig:
    """A module configuration (no calls yet): a rule of ``rules`` drawn as ``scaling_configs`` draws
    it, with an original length of ``MODULE_ORIG``; ``partial`` as there."""
    cfg = draw(scaling_configs(rules=rules, partial=partial))
    return ScaledRopeCallsConfig(**{**{f: getattr(cfg, f) for f in RopeScalingConfig.__dataclass_fields__},
                                    "orig": draw(MODULE_ORIG), "seq_len": 0, "max_pos": 0},
                                 batch=draw(st.integers(1, 2)), heads=draw(st.integers(1, 2)))
