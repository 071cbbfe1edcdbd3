"""The attention names with their options drawn together (issue 43, ``suites.pairwise``).

The other attention properties each draw one option against the defaults, so a kernel whose causal
fast path drops an explicit scale, whose tiles read another batch item past the first tile, or
which soft-caps its sink logits passes all of them. Here every pair of option values of
``scaled_dot_product_attention`` (``SDPA``), ``sliding_window_attention`` (``WINDOW``) and
``attention_varlen`` (``VARLEN``) meets in at least one configuration of a covering set, run first
on every profile, then random combinations. The check is the cheap one: agreement with the float64
reference under the tolerance policy, with the declared conventions (a causal alignment for
L != S, a window extent; the other value, where it alone agrees, is named as the convention). The
KV cache's covering set is ``suites/kvcache/test_kvcache_pairwise.py``.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from harness.spec import tolerance
from harness.reference.masks import causal_mask
from harness.reference.sliding_window import sliding_window_math
from harness.suites import pairwise
from harness.suites.attention import varlen_helpers as vh
from harness.suites.attention.configs import SdpaOptionsConfig, VarlenConfig, WindowOptionsConfig
from harness.suites.attention.helpers import SDPA, agree, submit_sdpa
from harness.suites.kit import KNOWN, expect_tensor, impl, run, under_convention
from harness.suites.regimes import covering

PROPERTY_PREFIX = "options_together"
SWA = "sliding_window_attention"

_HEADS = {"mha": (2, 2), "gqa": (4, 2), "mqa": (3, 1)}
_BATCH = {"1": (1,), "3": (3,), "2x2": (2, 2)}
_DTYPE = pairwise.Factor("dtype", ("float32", "bfloat16", "float16"), ("dtypes",))
_EV = pairwise.Factor("Ev", ("E", "other"), ("value",), "Ev = E = 16, or Ev = 24")


def _seed(row: dict) -> int:
    return pairwise.row_seed(row, 500)


# -- scaled_dot_product_attention -----------------------------------------------------------------
#: (L, S): square, fewer queries than keys, more, and past the 64/128-row tiles
_SDPA_SHAPES = {"square": (9, 9), "fewer_queries": (5, 12), "more_queries": (12, 5), "tile": (130, 67)}
_MASKS = ("none", "bool", "bool_heads", "float")

SDPA_OPTIONS = pairwise.Options(
    protocol_name=SDPA,
    factors=(
        pairwise.Factor("batch", tuple(_BATCH), ("query", "key"), "batch dims (1,), (3,), (2, 2)"),
        pairwise.Factor("shape", tuple(_SDPA_SHAPES), ("query", "key"), "(L, S) = (9, 9), (5, 12), (12, 5), (130, 67)"),
        pairwise.Factor("heads", tuple(_HEADS), ("enable_gqa",), "Hq:Hkv 2:2, 4:2, 3:1"),
        pairwise.Factor("causal", (False, True), ("is_causal",)),
        pairwise.Factor("mask", _MASKS, ("attn_mask",),
                        "none; boolean (L, S); boolean per batch item and head; float (L, S)"),
        pairwise.Factor("scale", (None, 0.3), ("scale",)),
        _DTYPE, _EV,
    ),
    build=lambda row: SdpaOptionsConfig(
        batch=_BATCH[row["batch"]], hq=_HEADS[row["heads"]][0], hkv=_HEADS[row["heads"]][1],
        L=_SDPA_SHAPES[row["shape"]][0], S=_SDPA_SHAPES[row["shape"]][1], E=16, Ev=16 if row["Ev"] == "E" else 24,
        dtype=row["dtype"], seed=_seed(row), causal=row["causal"], mask=row["mask"], scale=row["scale"]),
    forbidden=tuple((((("causal", True), ("mask", m)), "torch's SDPA takes attn_mask or is_causal, not both"))
                    for m in _MASKS[1:]),
    not_drawn={"dropout_p": "random: the dropout properties (attention.dropout*, attention_grad.dropout)",
               "dropout": "the dropout properties"},
)
SDPA_ROWS = pairwise.covering_rows(SDPA_OPTIONS)
#: the fields that turn each feature off (``pairwise.project``: a target that declares one unsupported)
SDPA_DROPS = {"attn_mask": {"mask": "none"}, "is_causal": {"causal": False}, "scale": {"scale": None},
              "enable_gqa": {"hq": lambda c: c.hkv}}


def _sdpa_call(cfg: SdpaOptionsConfig, device):
    """(keyword arguments for the target, the mask the reference applies, or None)."""
    kw = {} if cfg.scale is None else {"scale": cfg.scale}
    if cfg.mask == "none":
        return kw, None
    g = cfg.generator(salt=11)
    shape = (*cfg.batch, cfg.hq, cfg.L, cfg.S) if cfg.mask == "bool_heads" else (cfg.L, cfg.S)
    if cfg.mask == "float":
        mask = (2 * torch.randn(shape, generator=g)).to(cfg.torch_dtype)
    else:
        mask = torch.rand(shape, generator=g) < 0.7
        mask |= torch.arange(cfg.S)[None, :] == (torch.arange(cfg.L) % cfg.S)[:, None]  # every row sees a key
    kw["attn_mask"] = mask.to(device)
    return kw, kw["attn_mask"]


def _shown(cfg) -> str:
    opts = [f"is_causal" if getattr(cfg, "causal", False) else "",
            f"{cfg.mask} attn_mask" if getattr(cfg, "mask", "none") != "none" else "",
            f"scale {cfg.scale:g}" if cfg.scale is not None else ""]
    return (f"batch {cfg.batch}, Hq:Hkv {cfg.hq}:{cfg.hkv}, L {cfg.L}, S {cfg.S}, E {cfg.E}, Ev {cfg.Ev}, {cfg.dtype}"
            + "".join(f", {o}" for o in opts if o))


def check_sdpa(target, cfg: SdpaOptionsConfig):
    """Every pair of ``scaled_dot_product_attention``'s option values (docs/suites.md) together: the
    output equals the float64 reference; with ``is_causal`` and L != S under the declared
    ``causal_alignment``, on the rows that see a key. Options the target declares unsupported are
    left out (``pairwise.project``), the others kept together."""
    cfg = pairwise.project(target, cfg, SDPA_DROPS)
    q, k, v = cfg.qkv(target.device)
    kw, mask = _sdpa_call(cfg, target.device)
    what = f"{_shown(cfg)}: against the float64 reference"
    if not cfg.causal:
        return agree(submit_sdpa(target, cfg, q, k, v, **kw), q, k, v, what=what, attn_mask=mask,
                     scale=kw.get("scale"))
    out = submit_sdpa(target, cfg, q, k, v, is_causal=True, **kw).result()

    def against(alignment):
        vis = causal_mask(cfg.L, cfg.S, alignment, device=target.device)
        rows = vis.any(-1)
        if rows.any():
            agree(out[..., rows, :], q[..., rows, :], k, v, what=f"{what} ({alignment} causal)",
                  attn_mask=vis[rows], scale=kw.get("scale"))
    if cfg.L == cfg.S:  # (both alignments agree on a square mask)
        return against(target.conventions.get("causal_alignment", KNOWN["causal_alignment"].default))
    under_convention(target, "causal_alignment", against, what)


# -- sliding_window_attention ---------------------------------------------------------------------
_SWA_SHAPES = {"square": (9, 9), "fewer_queries": (5, 12), "tile": (130, 257)}
_WINDOWS = ("1", "narrow", "tile", "past")

WINDOW_OPTIONS = pairwise.Options(
    protocol_name=SWA,
    factors=(
        pairwise.Factor("batch", tuple(_BATCH), ("query", "key"), "batch dims (1,), (3,), (2, 2)"),
        pairwise.Factor("shape", tuple(_SWA_SHAPES), ("query", "key"), "(L, S) = (9, 9), (5, 12), (130, 257)"),
        pairwise.Factor("window", _WINDOWS, ("window",), "1; 4; 64; S + 3"),
        pairwise.Factor("heads", (1, 3), ("query",)),
        pairwise.Factor("scale", (None, 0.3), ("scale",)),
        _DTYPE, _EV,
    ),
    build=lambda row: WindowOptionsConfig(
        batch=_BATCH[row["batch"]], hq=row["heads"], hkv=row["heads"], L=_SWA_SHAPES[row["shape"]][0],
        S=_SWA_SHAPES[row["shape"]][1], E=16, Ev=16 if row["Ev"] == "E" else 24, dtype=row["dtype"], seed=_seed(row),
        window={"1": 1, "narrow": 4, "tile": 64, "past": _SWA_SHAPES[row["shape"]][1] + 3}[row["window"]],
        scale=row["scale"]),
)
WINDOW_ROWS = pairwise.covering_rows(WINDOW_OPTIONS)


def check_sliding_window(target, cfg: WindowOptionsConfig):
    """Every pair of ``sliding_window_attention``'s option values together: the output equals the
    float64 reference with the declared ``window_extent``."""
    q, k, v = cfg.qkv(target.device)
    kw = {} if cfg.scale is None else {"scale": cfg.scale}
    out = expect_tensor(impl(target, SWA)(q, k, v, cfg.window, **kw), SWA, (*q.shape[:-1], v.shape[-1]), q.dtype,
                        q.device)
    what = f"{_shown(cfg)}, window {cfg.window}: against the float64 reference"

    def against(extent):
        args = (q.cpu(), k.cpu(), v.cpu(), cfg.window)
        ref = sliding_window_math(*args, scale=kw.get("scale"), extent=extent)
        nai = sliding_window_math(*args, scale=kw.get("scale"), extent=extent, compute_dtype=q.dtype)
        tolerance.assert_close(out, ref, nai, dtype=q.dtype, what=f"{what} ({extent})")
    under_convention(target, "window_extent", against, what)


# -- attention_varlen -----------------------------------------------------------------------------
#: (q_lens, k_lens) per (sequences, lengths): Lq = Lk, Lq <= Lk, Lq >= Lk per sequence
_PACKS = {
    ("one", "equal"): ((9,), (9,)), ("one", "fewer_queries"): ((5,), (12,)), ("one", "more_queries"): ((12,), (5,)),
    ("several", "equal"): ((3, 7, 5), (3, 7, 5)), ("several", "fewer_queries"): ((3, 7, 5), (6, 9, 5)),
    ("several", "more_queries"): ((6, 9, 5), (3, 7, 5)),
    ("tile", "equal"): ((65, 130, 1), (65, 130, 1)), ("tile", "fewer_queries"): ((65, 1, 64), (130, 64, 64)),
    ("tile", "more_queries"): ((130, 64, 63), (65, 1, 63)),
    ("empty", "equal"): ((0, 9, 0, 5), (0, 9, 0, 5)), ("empty", "fewer_queries"): ((0, 4, 0, 5), (3, 9, 0, 6)),
    ("empty", "more_queries"): ((0, 9, 2, 6), (0, 4, 0, 5)),
}

VARLEN_OPTIONS = pairwise.Options(
    protocol_name=vh.VARLEN,
    factors=(
        pairwise.Factor("sequences", ("one", "several", "tile", "empty"), ("cu_seqlens_q", "cu_seqlens_k"),
                        "1 sequence; 3 short; 3 joined past the 64/128 tiles; 4 with zero-length ones"),
        pairwise.Factor("lengths", ("equal", "fewer_queries", "more_queries"),
                        ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"), "Lq vs Lk per sequence"),
        pairwise.Factor("causal", (False, True), ("causal", "is_causal")),
        pairwise.Factor("window", (0, 5), ("window", "varlen_window")),
        pairwise.Factor("heads", tuple(_HEADS), ("enable_gqa", "q", "k"), "Hq:Hkv 2:2, 4:2, 3:1"),
        pairwise.Factor("softcap", (0.0, 2.0), ("softcap",)),
        pairwise.Factor("sinks", (False, True), ("sinks",)),
        _DTYPE, pairwise.Factor("Ev", ("E", "other"), ("v",), "Ev = E = 16, or Ev = 24"),
    ),
    build=lambda row: VarlenConfig(
        q_lens=_PACKS[row["sequences"], row["lengths"]][0], k_lens=_PACKS[row["sequences"], row["lengths"]][1],
        hq=_HEADS[row["heads"]][0], hkv=_HEADS[row["heads"]][1], E=16, Ev=16 if row["Ev"] == "E" else 24,
        dtype=row["dtype"], seed=_seed(row), causal=row["causal"], window=row["window"], softcap=row["softcap"],
        sinks=row["sinks"]),
    not_drawn={"scale": "attention.scale and the SDPA covering set (the default 1/sqrt(E) here)",
               "chunk": "varlen_chunked.* (chunked local attention over packed documents, its own properties; not "
                        "yet paired with the other options here)",
               "varlen_chunked": "as chunk"},
)
VARLEN_ROWS = pairwise.covering_rows(VARLEN_OPTIONS)
VARLEN_DROPS = {"is_causal": {"causal": False}, "varlen_window": {"window": 0}, "softcap": {"softcap": 0.0},
                "sinks": {"sinks": False}, "enable_gqa": {"hq": lambda c: c.hkv}}


def check_varlen(target, cfg: VarlenConfig):
    """Every pair of ``attention_varlen``'s option values together: the packed output equals the
    float64 reference run per sequence (a window with the declared ``window_extent``). Options the
    target declares unsupported are left out (``pairwise.project``), the others kept together."""
    cfg = pairwise.project(target, cfg, VARLEN_DROPS)
    q, k, v = cfg.qkv(target.device)
    out = vh.call_varlen(target, cfg, q, k, v)
    what = f"{vh.describe(cfg)}, Hq:Hkv {cfg.hq}:{cfg.hkv}" + (f", softcap {cfg.softcap:g}" if cfg.softcap else "") + \
        (", sinks" if cfg.sinks else "") + ": against the float64 reference run per sequence"
    if not cfg.window:
        return vh.agree(out, cfg, q, k, v, what)
    under_convention(target, "window_extent",
                     lambda extent: vh.agree(out, cfg, q, k, v, f"{what} ({extent})", extent=extent), what)


#: a third of the profile's random combinations, at least 5: the covering set runs first on every profile
EXAMPLES = settings(max_examples=max(5, settings.default.max_examples // 3))


@pytest.mark.needs(SDPA)
@EXAMPLES
@given(cfg=pairwise.row_strategy(SDPA_OPTIONS).map(SDPA_OPTIONS.build))
@covering(tuple(SDPA_OPTIONS.build(r) for r in SDPA_ROWS))
def test_sdpa(target, cfg):
    run(target, check_sdpa, cfg)


@pytest.mark.needs(SWA)
@EXAMPLES
@given(cfg=pairwise.row_strategy(WINDOW_OPTIONS).map(WINDOW_OPTIONS.build))
@covering(tuple(WINDOW_OPTIONS.build(r) for r in WINDOW_ROWS))
def test_sliding_window(target, cfg):
    run(target, check_sliding_window, cfg)


@pytest.mark.needs(vh.VARLEN)
@EXAMPLES
@given(cfg=pairwise.row_strategy(VARLEN_OPTIONS).map(VARLEN_OPTIONS.build))
@covering(tuple(VARLEN_OPTIONS.build(r) for r in VARLEN_ROWS))
def test_varlen(target, cfg):
    run(target, check_varlen, cfg)
