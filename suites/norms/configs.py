"""Configurations for the normalization suites (LayerNorm, RMSNorm, norm placement).

As in ``harness.spec.configs``: the suites draw a configuration (shapes, dtype, eps,
seed) and rebuild every tensor from the seed, so a shrunk counterexample is a
handful of numbers that ``python -m harness repro`` replays exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.suites.strategies import DTYPE, SEED
from harness.spec.configs import Config, register

HALF_NAMES = ("float16", "bfloat16")


@register
@dataclass(frozen=True)
class NormConfig(Config):
    """input (*lead, *normalized_shape); Norm(normalized_shape, eps, elementwise_affine).

    ``lead`` are the token dims (batch, sequence), ``normalized_shape`` the 1-2
    trailing dims the statistics span. The input's spread is 2**log2_scale.
    """

    lead: tuple[int, ...]
    normalized_shape: tuple[int, ...]
    dtype: str
    eps: float
    affine: bool
    log2_scale: int
    seed: int

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.lead, *self.normalized_shape)

    @property
    def tokens(self) -> int:
        return math.prod(self.lead)

    @property
    def features(self) -> int:
        return math.prod(self.normalized_shape)

    @property
    def ctor_shape(self):
        """normalized_shape as the constructor receives it: an int for one dim, as usually written."""
        ns = self.normalized_shape
        return ns[0] if len(ns) == 1 else tuple(ns)

    def x(self, device="cpu", std: float | None = None, salt: int = 0) -> torch.Tensor:
        """Random input: per-token offsets up to +-2 std plus N(0, std^2), in the config's dtype."""
        g = self.generator(salt)
        std = 2.0 ** self.log2_scale if std is None else std
        z = torch.randn(self.shape, generator=g, dtype=torch.float64).clamp(-4, 4)
        offset = (torch.rand((*self.lead, *[1] * len(self.normalized_shape)), generator=g,
                             dtype=torch.float64) * 4 - 2)
        return ((z + offset) * std).to(self.torch_dtype).to(device)

    def params(self, salt: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
        """Random weight ~ 1 + U(-0.75, 0.75) and bias ~ U(-1, 1), (*normalized_shape),
        already rounded to the config's dtype (returned as float64)."""
        g = self.generator(salt)
        w = 1 + (torch.rand(self.normalized_shape, generator=g, dtype=torch.float64) * 1.5 - 0.75)
        b = torch.rand(self.normalized_shape, generator=g, dtype=torch.float64) * 2 - 1
        return w.to(self.torch_dtype).double(), b.to(self.torch_dtype).double()

    def uniform(self, lo: float, hi: float, salt: int) -> float:
        """One number drawn from the seed."""
        return float(torch.empty((), dtype=torch.float64).uniform_(lo, hi, generator=self.generator(salt)))


#: normalized shapes worth drawing (one Hypothesis choice each, so shrinking and explaining a
#: failure stay cheap): 1, odd sizes, sizes around vector widths (8/16/32/64), and 2-D shapes
#: (per-head norms) including size-1 dims
NORMALIZED_SHAPES = [(1,), (2,), (3,), (4,), (5,), (7,), (8,), (9,), (12,), (16,), (17,), (31,), (64,),
                     (65,), (127,), (1, 4), (4, 1), (2, 3), (3, 5), (4, 4), (2, 8), (8, 9), (16, 3), (5, 7)]
#: token dims (batch, sequence)
LEADS = [(1,), (2,), (3,), (5,), (1, 1), (1, 3), (2, 1), (2, 3), (3, 5), (2, 7)]
#: torch.nn.LayerNorm's default 1e-5, Llama's 1e-6, and values large enough to be visible
EPS = st.sampled_from([1e-5, 1e-6, 1e-3, 0.1, 0.5])


@st.composite
def norm_configs(draw, *, dtypes=DTYPE, min_tokens: int = 1, min_features: int = 1,
                 max_ns_dims: int = 2, affine=st.booleans(), eps=EPS) -> NormConfig:
    shapes = [s for s in NORMALIZED_SHAPES if len(s) <= max_ns_dims and math.prod(s) >= min_features]
    leads = [s for s in LEADS if math.prod(s) >= min_tokens]
    return NormConfig(lead=draw(st.sampled_from(leads)), normalized_shape=draw(st.sampled_from(shapes)),
                      dtype=draw(dtypes), eps=draw(eps), affine=draw(affine),
                      log2_scale=draw(st.integers(-3, 3)), seed=draw(SEED))


def half_dtypes():
    return st.sampled_from(HALF_NAMES)


def wide_dtypes():
    return st.sampled_from(["float32", "float64"])
