"""Attention conformance: the core properties of scaled dot-product attention.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V        (the seeds' formula)

Each ``check_*`` holds one property; each ``test_*`` draws configurations with
Hypothesis and runs the check through ``harness.runner.run``. Masks and
causality are in ``test_attention_masks.py``.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given

from harness.spec import tolerance
from harness.suites import regimes
from harness.suites.kit import autocast_dtypes, call_under_autocast, run
from harness.suites.attention.configs import attn_configs
from harness.suites.regimes import covering
from harness.suites.attention.helpers import SDPA, agree, allowance, call_sdpa, naive, same, submit_sdpa, truth
from harness.suites.positions.helpers import expect_floating

PROPERTY_PREFIX = "attention"
pytestmark = pytest.mark.needs(SDPA)


def check_agreement(target, cfg):
    """Output equals the float64 reference within the tolerance policy; NaN never passes."""
    q, k, v = cfg.qkv(target.device)
    agree(submit_sdpa(target, cfg, q, k, v), q, k, v)


def check_convex_combination(target, cfg):
    """Each output row is a convex combination of the values (softmax rows sum to 1): per dim within their
    min/max."""
    q, k, v = cfg.qkv(target.device, std=3.0)
    pending = submit_sdpa(target, cfg, q, k, v)
    vv = v.double().cpu().repeat_interleave(cfg.group, dim=-3)  # (..., Hq, S, Ev)
    lo, hi = vv.amin(dim=-2, keepdim=True), vv.amax(dim=-2, keepdim=True)  # (..., Hq, 1, Ev)
    slack = allowance(q, k, v)
    out = pending.result().double().cpu()
    below, above = (lo - slack) - out, out - (hi + slack)
    worst = float(torch.maximum(below, above).max())
    if not torch.isfinite(out).all() or worst > 0:
        idx = tuple(int(i) for i in torch.nonzero(~torch.isfinite(out) | (below > 0) | (above > 0))[0])
        raise AssertionError(f"output {out[idx]:.6g} at index {idx} lies outside the range of the "
                             f"values [{lo.expand_as(out)[idx]:.6g}, {hi.expand_as(out)[idx]:.6g}] "
                             f"by {worst:.3e}: not a convex combination (softmax rows must sum to 1)")


def check_permutation(target, cfg):
    """Permuting queries permutes outputs; permuting keys and values together changes nothing."""
    q, k, v = cfg.qkv(target.device)
    g = cfg.generator(salt=1)
    pq, pk = torch.randperm(cfg.L, generator=g), torch.randperm(cfg.S, generator=g)
    out = call_sdpa(target, cfg, q, k, v)
    same(submit_sdpa(target, cfg, q[..., pq, :], k, v), out[..., pq, :], q, k, v,
         f"queries permuted by {pq.tolist()}: output rows not permuted")
    same(submit_sdpa(target, cfg, q, k[..., pk, :], v[..., pk, :]), out, q, k, v,
         f"keys and values permuted together by {pk.tolist()}: output changed")


def check_scale(target, cfg):
    """The default scale is 1/sqrt(E) (E = the query/key dim, not Ev); an explicit scale is honoured."""
    q, k, v = cfg.qkv(target.device, std=2.0)
    agree(submit_sdpa(target, cfg, q, k, v), q, k, v,
          what=f"with the default scale (1/sqrt(E) = {1 / math.sqrt(cfg.E):.4g})")
    s = float(torch.empty(()).uniform_(0.05, 3.0, generator=cfg.generator(salt=2)))
    agree(submit_sdpa(target, cfg, q, k, v, scale=s), q, k, v, scale=s, what=f"with scale={s:.4g}")


def check_numerical_range(target, cfg):
    """Scores of +-300 give finite, correct results (a stable softmax subtracts the row max)."""
    q, k, v = cfg.qkv(target.device)
    qn = q.double() / q.double().norm(dim=-1, keepdim=True).clamp_min(1e-6)
    kn = k.double() / k.double().norm(dim=-1, keepdim=True).clamp_min(1e-6)
    # unit vectors times sqrt(300 * sqrt(E)): |score| = |cos| * 300 after the 1/sqrt(E) scale
    mag = math.sqrt(300.0 * math.sqrt(cfg.E))
    q, k = (qn * mag).to(q.dtype), (kn * mag).to(k.dtype)
    agree(submit_sdpa(target, cfg, q, k, v), q, k, v, what="with scores up to +-300")


def check_multi_head(target, cfg):
    """Each head equals single-head attention on its own slice (heads never mix)."""
    q, k, v = cfg.qkv(target.device)
    out = call_sdpa(target, cfg, q, k, v)
    for h in range(cfg.hq):
        kv = h // cfg.group
        qs, ks, vs = q[..., h:h + 1, :, :], k[..., kv:kv + 1, :, :], v[..., kv:kv + 1, :, :]
        same(submit_sdpa(target, cfg, qs, ks, vs), out[..., h:h + 1, :, :], qs, ks, vs,
             f"head {h} of the {cfg.hq}-head call differs from attention on head {h}'s slice alone")


def check_gqa(target, cfg):
    """GQA/MQA equals MHA with KV heads expanded by repeat_interleave, and a probe with a
    distinct constant value per KV head proves query head h reads KV head h // (Hq/Hkv).
    The probe runs first, so a wrong head mapping fails naming the KV head each query head read."""
    q, k, v = cfg.qkv(target.device)
    probe = torch.arange(1, cfg.hkv + 1, dtype=v.dtype, device=v.device)
    v_probe = probe.view(cfg.hkv, 1, 1).expand_as(v).contiguous()  # KV head g holds the value g + 1
    read = call_sdpa(target, cfg, q, k, v_probe, enable_gqa=True).double().mean(dim=(-2, -1))
    read = read.reshape(-1, cfg.hq)[0].round().long() - 1  # KV head each query head read
    expected = torch.arange(cfg.hq) // cfg.group
    if not torch.equal(read.cpu(), expected):
        wrong = [f"query head {h} read KV head {r}, expected {e}"
                 for h, (r, e) in enumerate(zip(read.tolist(), expected.tolist())) if r != e]
        more = f" (and {len(wrong) - 4} more)" if len(wrong) > 4 else ""
        raise AssertionError(f"{'; '.join(wrong[:4])}{more}; all query heads read KV heads "
                             f"{read.tolist()}, expected {expected.tolist()} (h // {cfg.group}, "
                             f"repeat_interleave order)")
    out = call_sdpa(target, cfg, q, k, v, enable_gqa=True)
    k_rep, v_rep = (t.repeat_interleave(cfg.group, dim=-3) for t in (k, v))
    mha = submit_sdpa(target, cfg, q, k_rep, v_rep, enable_gqa=False)
    same(mha, out, q, k_rep, v_rep, "GQA output differs from MHA with repeat_interleave'd KV heads")


def layouts(cfg, q, k, v):
    """(name, q, k, v) with the same values in the memory layouts real models pass."""
    def strided(t):  # last dim contiguous, rows strided: a slice of a wider buffer
        wide = torch.zeros(*t.shape[:-1], t.shape[-1] + 7, dtype=t.dtype, device=t.device)
        wide[..., 3:3 + t.shape[-1]] = t
        return wide[..., 3:3 + t.shape[-1]]

    def blhe(t):  # (B, L, H, E) memory, viewed as (B, H, L, E)
        return t.transpose(-3, -2).contiguous().transpose(-3, -2)
    out = [("(B, L, H, E) transposed to (B, H, L, E)", blhe(q), blhe(k), blhe(v)),
           ("last-dim-contiguous slices of wider rows", strided(q), strided(k), strided(v))]
    if cfg.hq == cfg.hkv and cfg.L == cfg.S and cfg.E == cfg.Ev:
        # one projection's output (B, L, 3, H, E), split and transposed, as nanoGPT / HF do
        packed = torch.stack([t.transpose(-3, -2) for t in (q, k, v)], dim=-3)
        out.append(("slices of a fused QKV projection",
                    *(packed.select(-3, i).transpose(-3, -2) for i in range(3))))
    return out


def check_layouts(target, cfg):
    """Inputs as models pass them -- (B, L, H, E) memory viewed as (B, H, L, E), slices of a fused QKV
    projection, last-dim-contiguous slices of wider rows, and K/V expanded with stride 0 (MQA) -- give the
    contiguous inputs' output; the output is new memory (every SDPA and sliding-window call also fails an
    output that shares an input's memory)."""
    q, k, v = cfg.qkv(target.device)
    out = call_sdpa(target, cfg, q, k, v)
    for name, q2, k2, v2 in layouts(cfg, q, k, v):
        same(submit_sdpa(target, cfg, q2, k2, v2), out, q, k, v, f"with {name} (strides "
             f"{q2.stride()}, {k2.stride()}, {v2.stride()})")
    # one KV head broadcast to every query head with stride 0 (MQA as models often pass it)
    k1 = k[..., :1, :, :].expand(*k.shape[:-3], cfg.hq, cfg.S, cfg.E)
    v1 = v[..., :1, :, :].expand(*v.shape[:-3], cfg.hq, cfg.S, cfg.Ev)
    dense = call_sdpa(target, cfg, q, k1.contiguous(), v1.contiguous())
    same(submit_sdpa(target, cfg, q, k1, v1), dense, q, k1.contiguous(), v1.contiguous(),
         f"with K and V expanded to {cfg.hq} heads with stride 0 (strides {k1.stride()})")


def check_autocast(target, cfg):
    """Called with float32 inputs inside torch.autocast(dtype = the config's half dtype: bfloat16 on CPU,
    float16/bfloat16 on CUDA), as training code calls a kernel: the output (either dtype) meets the
    half-precision tolerance."""
    q, k, v = (t.float() for t in cfg.qkv(target.device))
    out = expect_floating(call_under_autocast(target, SDPA, cfg.dtype, q, k, v), SDPA, cfg.out_shape())
    device_type = torch.device(target.device).type
    qh, kh, vh = (t.to(cfg.torch_dtype) for t in (q, k, v))
    tolerance.assert_close(out, truth(q, k, v), naive(qh, kh, vh), dtype=cfg.torch_dtype,
                           what=f"float32 inputs under torch.autocast({device_type!r}, {cfg.dtype})")


def check_dropout_zero(target, cfg):
    """dropout_p=0 is deterministic: two calls give bit-identical outputs equal to the reference."""
    q, k, v = cfg.qkv(target.device)
    a = call_sdpa(target, cfg, q, k, v, dropout_p=0.0)
    b = call_sdpa(target, cfg, q, k, v, dropout_p=0.0)
    if not torch.equal(a, b):
        diff = float((a.double() - b.double()).abs().nan_to_num(float("inf")).max())
        raise AssertionError(f"two calls with dropout_p=0.0 differ by {diff:.3e}")
    agree(a, q, k, v, what="with dropout_p=0.0")


@given(cfg=attn_configs())
@covering(regimes.AGREEMENT)
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_convex_combination(target, cfg):
    run(target, check_convex_combination, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_permutation(target, cfg):
    run(target, check_permutation, cfg)


@given(cfg=attn_configs())
@covering(regimes.FLOAT64_ATTENTION + regimes.ATTENTION)
def test_scale(target, cfg):
    run(target, check_scale, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_numerical_range(target, cfg):
    run(target, check_numerical_range, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_multi_head(target, cfg):
    run(target, check_multi_head, cfg)


@given(cfg=attn_configs(min_group=2))
@covering(regimes.GQA)
def test_gqa(target, cfg):
    run(target, check_gqa, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_layouts(target, cfg):
    run(target, check_layouts, cfg)


@given(cfg=attn_configs(dtypes=autocast_dtypes()))
@covering(regimes.AUTOCAST)
def test_autocast(target, cfg):
    run(target, check_autocast, cfg)


@given(cfg=attn_configs())
@covering(regimes.ATTENTION)
def test_dropout_zero(target, cfg):
    run(target, check_dropout_zero, cfg)
