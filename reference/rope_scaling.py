"""Scaled RoPE frequencies (context extension), float64: the protocol's ``rope_frequencies``.

    rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None) -> (inv_freq (dim/2,), attention_factor)

``dim`` is the head dim; ``scaling["partial_rotary_factor"]`` (p, default 1, any rule including
``default``) rotates only the first ``int(dim * p)`` dims, and every formula below then runs with
that rotary dim as ``dim`` (the exponent ``2i / (dim p)``, not ``2i / dim``; inv_freq has
``int(dim p) / 2`` pairs; the dims past it pass through untouched, which is the caller's). ``inv_freq[i]`` the angle per position of pair i,
``attention_factor`` the factor cos and sin are multiplied by (1 where a rule has none). Without
``scaling`` (or ``rope_type`` "default") the frequencies are plain RoPE's, ``base^(-2i/dim)``.
``scaling`` is a dict in Hugging Face's ``rope_parameters`` vocabulary (``modeling_rope_utils``, the
engines' common ground), ``rope_type`` naming the rule; ``factor`` is always explicit and
``original_max_position_embeddings`` (``orig`` below) is the pretraining length:

- ``linear`` (position interpolation): ``plain / factor``.
- ``dynamic`` (NTK-aware): at ``L = max(seq_len, orig)`` (``seq_len`` None: ``orig``), the base
  becomes ``base * (factor * L / orig - (factor - 1)) ** (dim / (dim - 2))``: plain up to ``orig``.
- ``yarn``: per pair i, a blend of the plain (extrapolated) and ``plain / factor`` (interpolated)
  frequencies, weight ``ramp(i) = clamp((i - low) / (high - low), 0, 1)`` on the interpolated one,
  where ``low, high`` are the pair indices whose wavelength makes ``beta_fast`` (default 32) and
  ``beta_slow`` (default 1) rotations over ``orig`` positions (``dim * ln(orig / (2 pi r)) / (2
  ln base)``), floored and ceiled with ``truncate`` (default True), clipped to [0, dim - 1], and
  ``high += 0.001`` when they meet. Attention factor: ``attention_factor`` when given; else
  ``mscale(factor, mscale) / mscale(factor, mscale_all_dim)`` when both are given and nonzero; else
  ``mscale(factor) = 0.1 ln(factor) + 1`` (1 for factor <= 1).
- ``llama3``: wavelength ``2 pi / plain``; above ``orig / low_freq_factor`` divided by ``factor``,
  below ``orig / high_freq_factor`` unchanged, between them ``(1 - s) plain / factor + s plain`` with
  ``s = (orig / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)``.
- ``longrope``: ``plain / ext`` with ``ext = long_factor`` (a list of dim/2) when ``seq_len >
  orig``, else ``short_factor``; attention factor ``attention_factor`` when given, else
  ``sqrt(1 + ln(factor) / ln(orig))`` (1 for factor <= 1).
"""
from __future__ import annotations

import math

import torch

RULES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")


def plain_frequencies(dim: int, base: float) -> torch.Tensor:
    """base^(-2i/dim), i < dim/2, float64."""
    return float(base) ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_range(dim: int, base: float, orig: int, beta_fast: float, beta_slow: float,
               truncate: bool = True) -> tuple[float, float]:
    """(low, high): the pair indices where the yarn ramp starts and ends."""
    def correction(rotations):
        return dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction(beta_fast), correction(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_ramp(dim: int, low: float, high: float) -> torch.Tensor:
    """The weight of the interpolated frequency per pair, (dim/2,) float64."""
    if low == high:
        high += 0.001
    return ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)


def _yarn(dim, base, s):
    factor, orig = float(s["factor"]), int(s["original_max_position_embeddings"])
    plain = plain_frequencies(dim, base)
    low, high = yarn_range(dim, base, orig, s.get("beta_fast") or 32, s.get("beta_slow") or 1,
                           s.get("truncate", True))
    ramp = yarn_ramp(dim, low, high)
    inv = plain / factor * ramp + plain * (1 - ramp)
    if s.get("attention_factor") is not None:
        return inv, float(s["attention_factor"])
    mscale, mscale_all_dim = s.get("mscale"), s.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        return inv, yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
    return inv, yarn_mscale(factor)


def llama3_bands(dim: int, base: float, s: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(wavelengths, low_edge, high_edge): a pair is low-frequency (divided by factor) past
    ``low_edge``, high-frequency (kept) below ``high_edge``."""
    orig = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / plain_frequencies(dim, base)
    return wavelen, orig / float(s["low_freq_factor"]), orig / float(s["high_freq_factor"])


def _llama3(dim, base, s):
    factor, lo, hi = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
    plain = plain_frequencies(dim, base)
    wavelen, low_edge, high_edge = llama3_bands(dim, base, s)
    smooth = (float(s["original_max_position_embeddings"]) / wavelen - lo) / (hi - lo)
    inv = torch.where(wavelen > low_edge, plain / factor, plain)
    medium = (wavelen >= high_edge) & (wavelen <= low_edge)
    return torch.where(medium, (1 - smooth) * plain / factor + smooth * plain, inv), 1.0


def dynamic_base(dim: int, base: float, factor: float, orig: int, seq_len: int | None) -> float:
    length = orig if seq_len is None else max(int(seq_len), orig)
    return float(base) * (factor * length / orig - (factor - 1)) ** (dim / (dim - 2))


def longrope_attention_factor(factor: float, orig: int) -> float:
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))


def rope_frequencies(dim: int, base: float = 10000.0, scaling: dict | None = None,
                     seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """(inv_freq (dim/2,) float64, attention_factor float) for the rule ``scaling`` names."""
    rule = "default" if not scaling else scaling.get("rope_type", "default")
    dim = int(dim * float((scaling or {}).get("partial_rotary_factor", 1.0)))  # the rotary dim
    if rule not in RULES:
        raise ValueError(f"unknown rope_type {rule!r}: one of {RULES}")
    if rule == "default":
        return plain_frequencies(dim, base), 1.0
    s = scaling
    if rule == "linear":
        return plain_frequencies(dim, base) / float(s["factor"]), 1.0
    if rule == "dynamic":
        b = dynamic_base(dim, base, float(s["factor"]), int(s["original_max_position_embeddings"]), seq_len)
        return plain_frequencies(dim, b), 1.0
    if rule == "yarn":
        return _yarn(dim, base, s)
    if rule == "llama3":
        return _llama3(dim, base, s)
    orig = int(s["original_max_position_embeddings"])
    ext = s["long_factor"] if seq_len is not None and seq_len > orig else s["short_factor"]
    inv = plain_frequencies(dim, base) / torch.as_tensor(ext, dtype=torch.float64)
    factor = float(s["factor"])
    att = float(s["attention_factor"]) if s.get("attention_factor") is not None else \
        longrope_attention_factor(factor, orig)
    return inv, att
