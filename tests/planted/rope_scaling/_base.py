"""A correct scaled-RoPE frequency function, written as a library writes it (float32 frequencies as
Hugging Face computes them, Python floats for the scalars), split into hooks.

Every planted-bug target in this folder subclasses ``Scaling``, overrides ONE hook with a real-world
mistake and exports the protocol name::

    import pathlib, sys; sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _base import Scaling

    class Planted(Scaling):
        def linear(self, plain, s):
            return ...                                   # BUG: ...

    rope_frequencies = Planted().rope_frequencies

Unmodified, it passes every ``rope_scaling`` property (tests/test_rope_scaling.py checks it). The
stateful module ``ScaledRope`` (exported as ``ScaledRotaryEmbedding``, at the end) is built on it the
same way: a planted module bug subclasses it, overrides one hook and exports the name with the
declarations below it.
"""
from __future__ import annotations

import math

import torch


class Scaling:
    def plain(self, dim, base):
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))

    def linear(self, plain, s):
        return plain / s["factor"], 1.0

    def dynamic_base(self, dim, base, s, seq_len):
        orig, factor = s["original_max_position_embeddings"], s["factor"]
        length = max(seq_len or orig, orig)
        return base * ((factor * length / orig) - (factor - 1)) ** (dim / (dim - 2))

    def dynamic(self, dim, base, s, seq_len):
        return self.plain(dim, self.dynamic_base(dim, base, s, seq_len)), 1.0

    def yarn_factor(self, s):
        return s["factor"]

    def mscale(self, scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    def yarn_attention(self, s):
        factor = self.yarn_factor(s)
        if s.get("attention_factor") is not None:
            return s["attention_factor"]
        if s.get("mscale") and s.get("mscale_all_dim"):
            return self.mscale(factor, s["mscale"]) / self.mscale(factor, s["mscale_all_dim"])
        return self.mscale(factor)

    def yarn(self, dim, base, plain, s):
        factor, orig = self.yarn_factor(s), s["original_max_position_embeddings"]

        def corr(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low, high = corr(s.get("beta_fast") or 32), corr(s.get("beta_slow") or 1)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        return plain / factor * ramp + plain * (1 - ramp), self.yarn_attention(s)

    def llama3_divide(self, wavelen, low_wavelen):
        return wavelen > low_wavelen

    def llama3(self, plain, s):
        factor, orig = s["factor"], s["original_max_position_embeddings"]
        lo, hi = s["low_freq_factor"], s["high_freq_factor"]
        wavelen = 2 * math.pi / plain
        inv = torch.where(self.llama3_divide(wavelen, orig / lo), plain / factor, plain)
        smooth = (orig / wavelen - lo) / (hi - lo)
        medium = ~(wavelen < orig / hi) * ~(wavelen > orig / lo)
        return torch.where(medium, (1 - smooth) * inv / factor + smooth * inv, inv), 1.0

    def longrope_long(self, seq_len, orig):
        return bool(seq_len) and seq_len > orig

    def longrope(self, plain, s, seq_len):
        orig, factor = s["original_max_position_embeddings"], s["factor"]
        ext = s["long_factor"] if self.longrope_long(seq_len, orig) else s["short_factor"]
        att = s.get("attention_factor")
        if att is None:
            att = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        return plain / torch.tensor(ext, dtype=torch.float32), att

    def finish(self, inv, att):
        return inv, att

    def rotary_dim(self, dim, scaling):
        return int(dim * (scaling or {}).get("partial_rotary_factor", 1.0))

    def rope_frequencies(self, dim, base=10000.0, scaling=None, seq_len=None):
        rule = (scaling or {}).get("rope_type", "default")
        dim = self.rotary_dim(dim, scaling)
        plain = self.plain(dim, base)
        if rule == "default":
            return self.finish(plain, 1.0)
        if rule == "linear":
            return self.finish(*self.linear(plain, scaling))
        if rule == "dynamic":
            return self.finish(*self.dynamic(dim, base, scaling, seq_len))
        if rule == "yarn":
            return self.finish(*self.yarn(dim, base, plain, scaling))
        if rule == "llama3":
            return self.finish(*self.llama3(plain, scaling))
        if rule == "longrope":
            return self.finish(*self.longrope(plain, scaling, seq_len))
        raise ValueError(f"unknown rope_type {rule!r}")


rope_frequencies = Scaling().rope_frequencies


# ---- the stateful module (``ScaledRotaryEmbedding``), written as Hugging Face's rotary modules are -----

from torch import nn  # noqa: E402


class ScaledRope(nn.Module):
    """A correct scaled rotary module: float32 tables from ``Scaling``, rotate-half pairs over the first R
    dims, the rest passed through, the dynamic rule's base grown with the longest length and reset
    below the original one (``dynamic_update`` grow_until_reset, declared in every file of this folder
    that exports it), LongRoPE's factors chosen per call. Planted module bugs override ONE hook and
    export ``ScaledRotaryEmbedding``."""

    frequencies = Scaling

    def __init__(self, dim, base=10000.0, scaling=None):
        super().__init__()
        self.dim, self.base, self.scaling = dim, base, scaling
        self.rule = (scaling or {}).get("rope_type", "default")
        self.orig = (scaling or {}).get("original_max_position_embeddings")
        self.cached = self.orig
        self.inv, self.att = self.frequencies().rope_frequencies(dim, base, scaling, None)
        self.original = self.inv

    def seq_len(self, x, positions):
        return int(positions.max()) + 1

    def update(self, seq_len):
        if self.rule == "longrope":
            self.inv, self.att = self.frequencies().rope_frequencies(self.dim, self.base, self.scaling, seq_len)
        if self.rule != "dynamic":
            return
        if seq_len > self.cached:  # growth
            self.inv, self.att = self.frequencies().rope_frequencies(self.dim, self.base, self.scaling, seq_len)
            self.cached = seq_len
        if seq_len < self.orig and self.cached > self.orig:  # reset
            self.inv, self.cached = self.original, self.orig

    def table(self, positions, dtype):
        freqs = positions.float()[:, None] * self.inv.to(positions.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * self.att).to(dtype), (emb.sin() * self.att).to(dtype)

    def rotate(self, x, cos, sin):
        R = cos.shape[-1]
        rot, rest = x[..., :R], x[..., R:]
        half = torch.cat((-rot[..., R // 2:], rot[..., : R // 2]), dim=-1)
        return torch.cat((rot * cos + half * sin, rest), dim=-1)

    def forward(self, x, positions):
        self.update(self.seq_len(x, positions))
        cos, sin = self.table(positions, x.dtype)
        return self.rotate(x, cos, sin)


#: what every file exporting the module declares (the float32 tables: no float64 claim)
HARNESS_CONVENTIONS = {"rope_layout": "rotate_half", "dynamic_update": "grow_until_reset"}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")
ScaledRotaryEmbedding = ScaledRope
