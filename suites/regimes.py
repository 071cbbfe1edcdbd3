"""Size regimes: where tiled kernels break, covered on every run (issue 11).

A Triton, CUDA or CUTLASS kernel is usually right on the small shapes that the strategies in
``harness.spec.configs`` draw, and wrong at its edges: past the first 64- or 128-row tile, for a key
length that is not a multiple of the block, for head dims above 128 or odd ones, for GQA groups
of 4 or 8. FlashAttention's own tests use exactly these sizes (seqlens (113, 203), (1023, 1024),
(1024, 1023), 2048; head dims 32 ... 256; nheads_k 1, 2, 6 under 6+ query heads).

Two regimes, for every attention-family property:

* the *small* regime the strategies draw (1 ... 40 positions, head dims 1 ... 64);
* the *tile-boundary* regime below. It is covered by explicit examples (``covering``), which
  Hypothesis runs first under every profile, the derandomized CI profile included: coverage of
  each boundary class never depends on luck or on the example budget. The classes:

  - lengths just below, at and past each tile size (``TILE_LENGTHS``) and odd lengths
    (``ODD_LENGTHS``), L != S in both directions;
  - head dims past 128 and odd ones (``WIDE_HEAD_DIMS``), E != Ev;
  - GQA ratios 1, 2, 4 and 8 with several KV heads, and MQA (``GQA_HEADS``);
  - windows below, at and past a tile and the sequence length.

Cost: the float64 reference and the naive same-dtype yardstick are computed for each call, so
the examples keep one of L, S small where the other is large, one head unless the property is
about heads, and batch 1 (a 2048 x 2048 x 256 float64 reference costs about a second on 2 cores).
The one-hot probes use an S x S identity as values: their examples keep S <= 1025.
"""
from __future__ import annotations

import functools

from hypothesis import example

from harness.suites.attention.configs import AttnConfig, ChunkConfig, VarlenConfig, WindowConfig
from harness.suites.norms.configs import NormConfig
from harness.suites.positions.configs import RopeConfig

TILE_LENGTHS = (1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 2048)
ODD_LENGTHS = (113, 203, 239)
WIDE_HEAD_DIMS = (8, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256)
#: (Hq, Hkv): group ratios 1, 2, 4 and 8 with several KV heads (so h // g and h % Hkv differ), and MQA
GQA_HEADS = ((4, 4), (8, 4), (8, 2), (16, 2), (32, 4), (6, 1), (32, 1))


def _attn(L, S, E, *, Ev=None, hq=1, hkv=1, dtype="float32", seed=11, batch=(1,)) -> AttnConfig:
    return AttnConfig(batch=batch, hq=hq, hkv=hkv, L=L, S=S, E=E, Ev=E if Ev is None else Ev,
                      dtype=dtype, seed=seed)


#: the core attention properties (agreement, convexity, permutation, scale, range, heads, masks):
#: rows past the first 64/128 tile, keys past 256 / 1024 and not a multiple of a block, L < S and
#: L > S, head dims past 128 and odd, each in a low precision too
ATTENTION = (
    _attn(129, 257, 64),                       # past the first 128-row tile; S > 256
    _attn(65, 1025, 32, dtype="bfloat16"),     # a ragged last key block past 1024
    _attn(513, 63, 16, seed=12),               # L > S; S just below a tile
    _attn(113, 203, 160, seed=13),             # FlashAttention's odd seqlens; E past 128
    _attn(1, 2048, 256, Ev=192, seed=14),      # decoding against 2048 keys, the widest head
    _attn(239, 127, 111, Ev=224, dtype="float16", seed=15),  # odd head dims, E != Ev
)

#: agreement alone also runs the (1023, 1024) / (1024, 1023) pair at a small head dim
AGREEMENT = ATTENTION + (
    _attn(1023, 1024, 40, seed=16),
    _attn(1024, 1023, 80, dtype="bfloat16", seed=17),
)

#: GQA / MQA: every ratio with several KV heads, past a tile, and MQA
GQA = tuple(_attn(65 + 64 * (i % 2), 129 + 128 * (i % 3), 64 if i % 2 else 96, hq=hq, hkv=hkv, seed=20 + i)
            for i, (hq, hkv) in enumerate(GQA_HEADS) if hq != hkv)

#: causal alignment and future-key leaks past the first tiles; the probe's values are S x S
CAUSAL = (
    _attn(257, 257, 32, seed=30),              # square, rows past 128 and 256
    _attn(129, 513, 16, seed=31),              # L < S: the two alignments differ everywhere
    _attn(1025, 129, 8, seed=32),              # L > S
    _attn(203, 113, 160, dtype="bfloat16", seed=33),
)


#: the backward (dq, dk, dv): past the first 64/128-row tile and a ragged key block, E past 128, a
#: low precision; each costs four autograd passes on the harness's side (float64 + three naive)
GRAD = (
    _attn(129, 257, 64, seed=80),
    _attn(65, 130, 32, dtype="bfloat16", seed=81),
    _attn(113, 203, 160, dtype="float16", seed=82),
)
#: causal backward past a tile (L <= S: every query sees a key under either alignment)
GRAD_CAUSAL = (
    _attn(129, 129, 32, seed=83),
    _attn(65, 257, 16, dtype="bfloat16", seed=84),
)
#: GQA backward: groups of 4 with several KV heads, and MQA, past a tile
GRAD_GQA = (
    _attn(65, 129, 64, hq=8, hkv=2, seed=85),
    _attn(129, 65, 32, hq=6, hkv=1, dtype="bfloat16", seed=86),
)

#: autocast (float32 inputs, the config's dtype is autocast's): past a tile, a wide head, decoding
AUTOCAST = (
    _attn(129, 257, 64, dtype="bfloat16", seed=50),
    _attn(1, 1025, 160, dtype="bfloat16", seed=51),
)

#: mask shapes: square (so a key-padding mask applied on the query axis still broadcasts), several
#: batch items and heads, past the first tiles
MASKS = (
    _attn(64, 64, 8, hq=2, hkv=2, batch=(2,), seed=35),
    _attn(129, 129, 4, hq=3, hkv=1, batch=(3,), seed=36),
    _attn(65, 257, 4, hq=2, hkv=2, batch=(2,), seed=37),
    _attn(33, 33, 8, hq=2, hkv=2, batch=(2, 2), dtype="bfloat16", seed=38),
)


def _window(L, S, window, *, E=16, dtype="float32", seed=40, h=1) -> WindowConfig:
    return WindowConfig(batch=(1,), hq=h, hkv=h, L=L, S=S, E=E, Ev=E, dtype=dtype, seed=seed, window=window)


#: windows below, at and past a tile and the sequence length, over sequences past the first tiles
WINDOW = (
    _window(257, 257, 63, seed=40),            # window below a tile
    _window(257, 257, 64, seed=41),            # at a tile
    _window(300, 300, 129, seed=42),           # past a tile
    _window(129, 513, 128, E=64, seed=43),     # L < S, window at a tile
    _window(200, 200, 200, seed=44),           # window = L
    _window(130, 130, 257, dtype="bfloat16", seed=45),  # window past L
    _window(1025, 1025, 256, E=8, seed=46),    # a long sequence, window past 128
)


def _chunk(L, S, chunk, *, E=16, dtype="float32", seed=60, h=1) -> ChunkConfig:
    return ChunkConfig(batch=(1,), hq=h, hkv=h, L=L, S=S, E=E, Ev=E, dtype=dtype, seed=seed, chunk=chunk)


#: chunks below, at and past a tile, chunk boundaries inside and at a tile edge, a decode past a boundary
CHUNK = (
    _chunk(257, 257, 63, seed=60),             # chunk below a tile: boundaries inside tiles
    _chunk(257, 257, 64, seed=61),             # at a tile
    _chunk(300, 300, 129, seed=62),            # past a tile
    _chunk(1, 513, 128, E=64, seed=63),        # one decoding step just past a boundary (position 512)
    _chunk(130, 130, 257, dtype="bfloat16", seed=64),  # one chunk: plain causal attention
)


#: the sliding-window backward: rows past a tile with the window below / past a tile, L < S (the
#: first keys outside every window), and a low precision
GRAD_WINDOW = (
    _window(257, 257, 63, seed=87),
    _window(129, 257, 129, E=32, dtype="bfloat16", seed=88),
)


def _varlen(q_lens, k_lens=None, *, E=32, Ev=None, hq=1, hkv=1, dtype="float32", seed=110, **kw) -> VarlenConfig:
    return VarlenConfig(q_lens=tuple(q_lens), k_lens=tuple(q_lens if k_lens is None else k_lens), hq=hq, hkv=hkv,
                        E=E, Ev=E if Ev is None else Ev, dtype=dtype, seed=seed, **kw)


#: packed sequences (attention_varlen): joins (where one sequence ends and the next starts) just
#: below, at and past the 64- and 128-row tiles, sequences past a tile, E past 128, half dtypes
VARLEN_TILES = (
    _varlen((63, 70), seed=110),                         # join at 63
    _varlen((64, 65, 1), E=16, seed=111),                # joins at 64 and 129
    _varlen((65, 63), dtype="bfloat16", causal=True, seed=112),   # join at 65, causal
    _varlen((127, 2, 60), E=64, causal=True, seed=113),  # joins at 127 and 129
    _varlen((128, 129), E=8, dtype="float16", seed=114),  # join at 128
    _varlen((1, 129, 127), E=16, causal=True, seed=115),  # joins at 1 and 130, a sequence past a tile
)
#: agreement: the tile joins, L != S per sequence both ways, E past 128 and odd, E != Ev
VARLEN = VARLEN_TILES[:3] + (
    _varlen((129, 7, 64), (65, 257, 64), E=160, Ev=96, seed=116),
    _varlen((113, 203), (203, 113), E=111, dtype="float16", seed=117),
)
#: causal with Lq != Lk per sequence past a tile, both ways (top-left and bottom-right differ there)
VARLEN_CAUSAL = (
    _varlen((129, 1, 65), (257, 64, 63), causal=True, seed=118),
    _varlen((65, 200), (1, 129), E=64, dtype="bfloat16", causal=True, seed=119),
)
#: GQA groups of 4 and 8 with several KV heads, and MQA, past a tile
VARLEN_GQA = (
    _varlen((65, 64), E=64, hq=8, hkv=2, causal=True, seed=120),
    _varlen((127, 3), E=32, hq=16, hkv=2, seed=121),
    _varlen((1, 129), (64, 129), E=16, hq=6, hkv=1, dtype="bfloat16", seed=122),
)
#: windows below, at and past a tile over sequences joined at a tile
VARLEN_WINDOW = (
    _varlen((129, 64), E=16, causal=True, window=63, seed=123),
    _varlen((63, 257), E=16, causal=True, window=128, seed=124),
    _varlen((200, 65), (257, 65), E=16, causal=True, window=129, dtype="bfloat16", seed=125),
)
#: zero-length sequences first, between and last, on either side, next to sequences past a tile
VARLEN_ZERO = (
    _varlen((0, 129, 0, 64), E=16, causal=True, seed=128),
    _varlen((64, 0, 65, 3), (64, 3, 0, 0), E=16, seed=129),
)
#: documents packed with position ids restarting per document, joined at 63 and 129, E up to 128
VARLEN_ROPE = (
    _varlen((63, 66), E=64, causal=True, seed=130),
    _varlen((129, 1, 127), E=128, dtype="bfloat16", causal=True, seed=131),
)
#: the backward past a tile and across joins at 63 and 129
VARLEN_GRAD = (
    _varlen((63, 66, 1), E=32, causal=True, seed=126),
    _varlen((129, 65), (64, 129), E=16, hq=4, hkv=2, dtype="bfloat16", seed=127),
    _varlen((65, 0, 63), (129, 3, 30), E=16, causal=True, seed=132),  # causal Lq != Lk both ways, an empty one
)


def _rope(L, D, *, dtype="float32", offset=0, spread=0, seed=60, heads=2) -> RopeConfig:
    return RopeConfig(batch=1, heads=heads, L=L, D=D, dtype=dtype, base=10000.0, offset=offset, spread=spread,
                      per_batch=False, shift=4096, seed=seed)


#: RoPE past a tile of positions and of head dims (a kernel that rotates only the first 128 dims,
#: or only the first block of positions, is right below these)
ROPE = (
    _rope(2048, 16, seed=60, heads=1),
    _rope(129, 160, seed=61),
    _rope(257, 256, dtype="bfloat16", seed=62),
    _rope(113, 192, offset=1000, spread=4096, seed=63),
    _rope(65, 224, dtype="float16", seed=64),
)


def _norm(lead, features, dtype="float32", affine=True, seed=70) -> NormConfig:
    return NormConfig(lead=lead, normalized_shape=(features,), dtype=dtype, eps=1e-5, affine=affine,
                      log2_scale=0, seed=seed)


#: norms over hidden sizes past a block (a reduction that drops its last partial block, or reads
#: only the first 1024 features, is right below these), and many tokens
NORMS = (
    _norm((2,), 1025, seed=70),
    _norm((3,), 4097, dtype="bfloat16", seed=71),
    _norm((1, 2), 8192, affine=False, seed=72),
    _norm((257,), 160, dtype="float16", seed=73),
    _norm((2, 65), 2048, seed=74),
)

#: float64, run first where a kernel's scalars show (scale, eps): compiled Triton types a Python float
#: argument fp32, about 3e-8 off, which float64's tolerance sees at any size (the first CUDA run's
#: finding; ``harness.boundary.interpret.compiled_scalars`` makes the CPU interpreter round it the same way).
#: Small, so that the float64 reference costs nothing.
FLOAT64_ATTENTION = (_attn(65, 130, 24, hq=2, hkv=2, dtype="float64", seed=90),)
FLOAT64_NORMS = (_norm((3,), 96, dtype="float64", seed=91),)

#: norms under torch.autocast (float32 input, the config's dtype is autocast's): wide rows, many tokens
NORMS_AUTOCAST = (
    _norm((3,), 1025, dtype="bfloat16", seed=75),
    _norm((2, 4), 257, dtype="bfloat16", affine=False, seed=76),
)


def covering(configs, name: str = "cfg"):
    """Apply ``hypothesis.example(cfg=c)`` for every config: run first, on every profile. Hypothesis
    does not shrink an explicit example: a property that fails on one of them is replayed on smaller
    configurations of the same kind, and the failure reports the smallest that still fails, or says
    "boundary example, not shrunk" (``suites.boundary``)."""
    examples = tuple(configs)

    def decorate(test):
        @functools.wraps(test)
        def shrinking(*args, **kwargs):
            __tracebackhide__ = True  # pytest shows the message, not this frame
            try:
                return test(*args, **kwargs)
            except AssertionError as exc:
                from harness.runner import PropertyFailure
                cfg = kwargs.get(name)
                if not isinstance(exc, PropertyFailure) or cfg not in examples:
                    raise
                from harness.suites.boundary import boundary_failure
                limit = getattr(kwargs.get("target"), "limit", None)
                hung = lambda: len(getattr(limit, "hung", None) or ())  # noqa: E731
                if hung():  # a function that hung is not called again: every replay would "fail" the same way
                    raise boundary_failure(cfg, exc, None, why_not="a call ran past the per-call limit, and the "
                                           "function is not called again") from None

                def replay(candidate):
                    try:
                        test(*args, **{**kwargs, name: candidate})
                    except PropertyFailure as failure:
                        return None if hung() else failure  # (after a hang every call is refused)
                    except (KeyboardInterrupt, SystemExit):
                        raise
                    except BaseException:  # noqa: BLE001 - unsupported, skipped, another error: not this failure
                        return None
                    return None
                raise boundary_failure(cfg, exc, replay) from None

        for cfg in reversed(examples):
            shrinking = example(**{name: cfg})(shrinking)
        return shrinking
    return decorate
