"""Attention conformance: causal, boolean and float masks, fully masked rows.

Masked keys must have *no* influence, even when they hold extreme values
(+-1e4): a finite mask constant such as -1e4 or -1e9 added to the scores lets
them leak. The causal alignment for L != S is measured and named
(``top_left`` as torch, ``bottom_right`` as FlashAttention >= 2.1).
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given

from harness.suites import regimes
from harness.suites.attention.configs import attn_configs
from harness.suites.regimes import covering
from harness.suites.kit import check_convention, record_label, run
from harness.reference.masks import causal_mask
from harness.suites.attention.helpers import EXTREME, SDPA, agree, allowance, call_sdpa, poison, same, show_mask, visibility

PROPERTY_PREFIX = "attention"
pytestmark = pytest.mark.needs(SDPA)


def _agree_rows(out, q, k, v, rows: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    """Agreement restricted to query rows ``rows`` (attention rows are independent)."""
    if rows.any():
        agree(out[..., rows, :], q[..., rows, :], k, v, attn_mask=mask[..., rows, :], what=what)


def measured_alignment(vis: torch.Tensor, L: int, S: int, prefer: str | None = None) -> str | None:
    """The alignment ``vis`` shows; with L == S both do, and ``prefer`` (the declared one) is named."""
    for name in ((prefer,) if prefer else ()) + ("top_left", "bottom_right"):
        if bool((vis == causal_mask(L, S, name, device=vis.device)).all()):
            return name
    return None


def check_causal(target, cfg):
    """is_causal: the alignment for L != S is measured and named; future keys and values, even
    at +-1e4, change nothing at earlier queries; a visible key does change the output."""
    declared = target.conventions
    vis = visibility(target, cfg, is_causal=True)  # (*batch, Hq, L, S)
    measured = measured_alignment(vis, cfg.L, cfg.S, declared.get("causal_alignment"))
    n = max(cfg.L, cfg.S)  # both conventions agree on a square mask: the plain lower triangle
    square = visibility(target, replace(cfg, L=n, S=n), is_causal=True)
    if measured is not None and not bool((square == causal_mask(n, n, device=square.device)).all()):
        measured, vis = None, square
    flat = vis.reshape(-1, cfg.L, cfg.S)
    label = check_convention(
        "causal_alignment", measured, declared,
        f"\n  measured visibility (row = query, 1 = key visible):{show_mask(flat[0].cpu())}")
    record_label(target, label)
    mask = causal_mask(cfg.L, cfg.S, measured, device=target.device)  # (L, S)
    seen = mask.any(dim=-1)  # rows with at least one visible key
    q, k, v = cfg.qkv(target.device)
    out = call_sdpa(target, cfg, q, k, v, is_causal=True)
    _agree_rows(out, q, k, v, seen, mask, "causal output")

    g = cfg.generator(salt=3)
    cut = int(torch.randint(0, cfg.S, (1,), generator=g))  # keys j > cut become extreme
    future = torch.arange(cfg.S, device=target.device) > cut
    k2, v2 = poison(q, k, v, future, g)
    out2 = call_sdpa(target, cfg, q, k2, v2, is_causal=True)
    rows = seen & ~(mask & future).any(dim=-1)  # queries that see no key after the cut
    if rows.any():
        same(out2[..., rows, :], out[..., rows, :], q[..., rows, :], k, v,
             f"keys/values after position {cut} set to +-{EXTREME:g} changed earlier queries "
             f"{rows.nonzero().flatten().tolist()}", attn_mask=mask[rows])

    v3 = v.clone()
    v3[..., cut, :] += 4.0  # key `cut` is visible to the queries whose mask includes it
    out3 = call_sdpa(target, cfg, q, k, v3, is_causal=True)
    _agree_rows(out3, q, k, v3, seen, mask, f"after changing the visible value at key {cut}")


def random_mask(cfg, g: torch.Generator, device) -> tuple[torch.Tensor, str, torch.Tensor]:
    """A boolean mask that differs per batch item and head (or broadcasts), each row >= 1 key.

    Returns (mask, variant name, bool (S,) of keys some row relies on)."""
    variant = ["per_item_and_head", "per_head", "per_item", "2d"][int(torch.randint(0, 4, (1,), generator=g))]
    shape = {"per_item_and_head": (*cfg.batch, cfg.hq, cfg.L, cfg.S),
             "per_head": (*[1] * len(cfg.batch), cfg.hq, cfg.L, cfg.S),
             "per_item": (*cfg.batch, 1, cfg.L, cfg.S), "2d": (cfg.L, cfg.S)}[variant]
    mask = torch.rand(shape, generator=g) < 0.6
    keep = torch.randint(0, cfg.S, shape[:-1], generator=g)  # one guaranteed visible key per row
    mask.scatter_(-1, keep.unsqueeze(-1), True)
    protected = torch.zeros(cfg.S, dtype=torch.bool)
    protected[keep.flatten()] = True  # each row's guaranteed key
    return mask.to(device), variant, protected


def check_bool_mask(target, cfg):
    """Boolean masks (True = may attend) apply to the right batch item and head, and masked
    keys holding +-1e4 have no influence at all."""
    g = cfg.generator(salt=4)
    mask, variant, protected = random_mask(cfg, g, target.device)
    q, k, v = cfg.qkv(target.device)
    # keys masked for every query; never a row's guaranteed key, so no row is fully masked
    dropped = (torch.rand(cfg.S, generator=g) < 0.3) & ~protected
    mask = mask & ~dropped.to(target.device)
    out = call_sdpa(target, cfg, q, k, v, attn_mask=mask)
    agree(out, q, k, v, attn_mask=mask, what=f"with a {variant} boolean mask {tuple(mask.shape)}")
    if dropped.any():
        d = dropped.to(target.device)
        k2, v2 = poison(q, k, v, d, g)
        out2 = call_sdpa(target, cfg, q, k2, v2, attn_mask=mask)
        same(out2, out, q, k, v, f"masked keys {d.nonzero().flatten().tolist()} set to "
             f"+-{EXTREME:g} changed the output", attn_mask=mask)


def check_float_mask(target, cfg):
    """Float masks are added to the scores (per item and head), -inf entries included."""
    g = cfg.generator(salt=5)
    visible, variant, _ = random_mask(cfg, g, "cpu")
    bias = torch.randn(visible.shape, generator=g, dtype=torch.float64) * 2.0
    bias = bias.masked_fill(~visible, float("-inf")).to(cfg.torch_dtype).to(target.device)
    q, k, v = cfg.qkv(target.device)
    out = call_sdpa(target, cfg, q, k, v, attn_mask=bias)
    agree(out, q, k, v, attn_mask=bias, what=f"with a {variant} float mask {tuple(bias.shape)}")


def mask_forms(cfg) -> dict[str, tuple[int, ...]]:
    """Every mask shape torch's SDPA accepts for (*batch, Hq, L, S) scores, by name."""
    B, ones, H, L, S = cfg.batch, (1,) * len(cfg.batch), cfg.hq, cfg.L, cfg.S
    return {"(L, S)": (L, S), "(1, L, S)": (1, L, S), "(H, L, S)": (H, L, S),
            "(1, 1, L, S)": (*ones, 1, L, S), "(B, 1, 1, S) key padding": (*B, 1, 1, S),
            "(B, 1, L, S)": (*B, 1, L, S), "(1, H, L, S)": (*ones, H, L, S), "(B, H, L, S)": (*B, H, L, S)}


def _pattern(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """A random visibility pattern of ``shape`` with at least one visible key in every row."""
    pattern = torch.rand(shape, generator=g) < 0.5
    keep = torch.randint(0, shape[-1], shape[:-1], generator=g)
    return pattern.scatter_(-1, keep.unsqueeze(-1), True)


def check_mask_shapes(target, cfg):
    """Every broadcastable mask shape, boolean and float (0 / -inf), is applied on the right
    axis, batch item and head: the one-hot probe reads back exactly the broadcast pattern."""
    g = cfg.generator(salt=7)
    full = (*cfg.batch, cfg.hq, cfg.L, cfg.S)
    for form, shape in mask_forms(cfg).items():
        pattern = _pattern(shape, g)
        expected = pattern.expand(full)
        for kind in ("bool", "float"):
            mask = pattern if kind == "bool" else torch.zeros(shape, dtype=cfg.torch_dtype).masked_fill(
                ~pattern, float("-inf"))
            seen = visibility(target, cfg, attn_mask=mask.to(target.device)).cpu()
            if not torch.equal(seen, expected):
                idx = tuple(int(i) for i in (seen != expected).nonzero()[0])
                *bh, row, key = idx
                raise AssertionError(
                    f"a {kind} mask of shape {form} = {tuple(shape)} was not applied as broadcast to "
                    f"{full}: at batch/head {tuple(bh)}, query {row}, key {key} the key is "
                    f"{'seen' if seen[idx] else 'not seen'} but the mask says "
                    f"{'visible' if expected[idx] else 'masked'}\n  measured (row = query):"
                    f"{show_mask(seen[tuple(bh)])}\n  expected:{show_mask(expected[tuple(bh)])}")


def masked_rows(cfg, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(a random boolean mask, bool (L,) on ``device``): about 40 % of the rows, one at least, fully
    masked (every key False), the others each with a visible key (``random_mask``)."""
    g = cfg.generator(salt=6)
    mask, _, _ = random_mask(cfg, g, device)
    dead = torch.rand(cfg.L, generator=g) < 0.4
    dead[int(torch.randint(0, cfg.L, (1,), generator=g))] = True
    dead = dead.to(device)
    mask = mask.clone()
    mask[..., dead, :] = False
    return mask, dead


def masked_rows_convention(out, v, dead, group: int, tol: float) -> str | None:
    """What an output's fully masked rows ``dead`` (bool (L,)) hold, as ``fully_masked_rows`` names it:
    "nan", "zeros", "uniform" (the mean of all values, what softmax over equal finite scores gives,
    within ``tol``), or None (none of them)."""
    rows = out[..., dead.to(out.device), :].double().cpu()
    uniform = v.double().cpu().repeat_interleave(group, dim=-3).mean(dim=-2, keepdim=True).expand_as(rows)
    if bool(torch.isnan(rows).all()):
        return "nan"
    if bool((rows == 0).all()):
        return "zeros"
    if bool(torch.isfinite(rows).all()) and float((rows - uniform).abs().max()) <= tol:
        return "uniform"
    return None


def check_fully_masked_rows(target, cfg):
    """Rows whose mask is all False: the behaviour (zeros, NaN, uniform) is detected and named;
    every other row is unaffected. Any of the three passes unless another one is declared."""
    mask, dead = masked_rows(cfg, target.device)
    q, k, v = cfg.qkv(target.device)
    out = call_sdpa(target, cfg, q, k, v, attn_mask=mask)
    rows = out[..., dead, :].double().cpu()
    measured = masked_rows_convention(out, v, dead, cfg.group, 2 * allowance(q, k, v))
    record_label(target, check_convention(
        "fully_masked_rows", measured, target.conventions,
        f"\n  fully masked rows {dead.nonzero().flatten().tolist()} returned e.g. {rows.flatten()[:4].tolist()}"))
    live = ~dead
    if live.any():
        agree(out[..., live, :], q[..., live, :], k, v, attn_mask=mask[..., live, :],
              what="rows next to the fully masked ones")


@given(cfg=attn_configs(distinct_lengths=True, gqa=True))
@covering(regimes.CAUSAL)
def test_causal(target, cfg):
    run(target, check_causal, cfg)


@given(cfg=attn_configs(gqa=True))
@covering(regimes.ATTENTION)
def test_bool_mask(target, cfg):
    run(target, check_bool_mask, cfg)


@given(cfg=attn_configs(gqa=True))
@covering(regimes.ATTENTION)
def test_float_mask(target, cfg):
    run(target, check_float_mask, cfg)


@given(cfg=attn_configs(gqa=True))
@covering(regimes.MASKS)
def test_mask_shapes(target, cfg):
    run(target, check_mask_shapes, cfg)


@given(cfg=attn_configs(gqa=True))
@covering(regimes.ATTENTION)
def test_fully_masked_rows(target, cfg):
    run(target, check_fully_masked_rows, cfg)
