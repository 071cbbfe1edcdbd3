"""Multi-head latent attention (DeepSeek's MLA) in its decode-kernel form: ``mla_decode``.

Protocol (harness/spec/protocol.py, reference/mla.py): FlashMLA's ``flash_mla_with_kvcache`` contract,
q (B, Lq, Hq, Dc + Dr), a latent cache (B, Smax, Hkv, Dc + Dr) shared by all query heads (or a paged
pool with a block table), cache_seqlens (B,) counting the new tokens, values the first head_dim_v dims,
scale D^-0.5 by default, causal bottom-right per item; out (B, Lq, Hq, Dv). The properties hold it to
the float64 latent reference (``agreement``), to DeepSeek's attention before absorption computed from
the same weights (``absorbed``: the reason the decode form exists), to nothing read past an item's
length even at +-1e4 (``past_seqlen``), to the linear call when the same positions sit in a paged pool
(``paged``), and to GQA-style sharing of several latent heads (``kv_heads``).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from harness.reference.mla import absorb, default_scale, mla_math, unabsorbed_math
from harness.spec import tolerance
from harness.suites.attention.helpers import EXTREME, extreme_like
from harness.suites.kit import expect_tensor, impl, run
from harness.suites.mla.configs import AbsorbConfig, MLAConfig, absorb_configs, mla_configs

PROPERTY_PREFIX = "mla"
NAME = "mla_decode"
pytestmark = pytest.mark.needs(NAME)

#: run first on every profile: one decoding step over ragged caches; two new tokens (MTP) and a value
#: prefix; DeepSeek's head layout scaled down
DECODE = MLAConfig(batch=2, lq=1, hq=4, hkv=1, dc=16, dr=4, dv=16, lengths=(7, 3), dtype="float32", seed=1)
MTP = MLAConfig(batch=1, lq=2, hq=2, hkv=1, dc=8, dr=8, dv=5, lengths=(9,), dtype="bfloat16", seed=2, slack=3)
DEEPSEEK = AbsorbConfig(batch=1, lq=1, hq=4, dc=32, dr=8, d_nope=16, d_v=16, lengths=(12,), dtype="float32", seed=3)


def call_mla(target, q, cache, seqlens, dv, **kw):
    out = impl(target, NAME)(q, cache, seqlens, dv, **kw)
    return expect_tensor(out, NAME, (*q.shape[:-1], dv), q.dtype, q.device)


def _truth(cfg: MLAConfig, q, cache, **kw):
    seqlens = cfg.seqlens()
    ref = mla_math(q.cpu(), cache.cpu(), seqlens, cfg.dv, causal=cfg.causal, **kw)
    naive = mla_math(q.cpu(), cache.cpu(), seqlens, cfg.dv, causal=cfg.causal, compute_dtype=q.dtype, **kw)
    return ref, naive


#: (what the output matches, the kwargs of ``mla_math`` that give it): known mistakes, named in a failure
def _suspects(cfg: MLAConfig, q, cache):
    D = cfg.D
    dropped = torch.cat([q[..., :cfg.dc], torch.zeros_like(q[..., cfg.dc:])], dim=-1)
    dims = {}  # the widths a kernel may take for "the" head dim: the latent's, the values'
    for name, d in (("Dc", cfg.dc), ("head_dim_v", cfg.dv)):
        dims.setdefault(d, []).append(name)
    return [
        *((f"a default scale of {' = '.join(f'{n}^-0.5' for n in names)} = {d ** -0.5:.4g} (not q's D = Dc + Dr)",
           q, cache, {"scale": d ** -0.5}) for d, names in dims.items()),
        ("the RoPE part (q[..., Dc:] . k_pe) left out of the scores", dropped, cache, {"scale": D ** -0.5}),
        ("causal attention aligned top-left (query i sees keys 0..i) instead of to the end of each item",
         q, cache, {"top_left": True}),
    ]


def _diagnosis(cfg: MLAConfig, q, cache, out) -> str:
    for what, q2, cache2, kw in _suspects(cfg, q, cache):
        lens = cfg.seqlens()
        if kw.pop("top_left", False):
            if not cfg.causal:
                continue
            lens = torch.full_like(lens, cfg.lq)  # query i sees keys 0 .. i: the item's first Lq keys, bottom-right
        guess = mla_math(q2.cpu(), cache2.cpu(), lens, cfg.dv, causal=cfg.causal, **kw)
        naive = mla_math(q2.cpu(), cache2.cpu(), lens, cfg.dv, causal=cfg.causal, compute_dtype=q.dtype, **kw)
        if tolerance.compare(out.cpu(), guess, naive, dtype=q.dtype).ok:
            return f"\n  the output matches {what}"
    return ""


def _linear_call(target, cfg: MLAConfig):
    """(q, cache, out, comparison with the float64 reference) of one call over the linear cache."""
    q, cache = cfg.q(target.device), cfg.cache(target.device)
    out = call_mla(target, q, cache, cfg.seqlens(target.device), cfg.dv, causal=cfg.causal)
    ref, naive = _truth(cfg, q, cache)
    return q, cache, out, tolerance.compare(out, ref, naive, dtype=q.dtype)


def check_agreement(target, cfg: MLAConfig):
    """One call over a linear latent cache (1 .. 3 items of ragged lengths, 1 .. 4 new tokens, causal or
    not, the default scale D^-0.5) equals the float64 reference: scores over the latent and RoPE parts,
    values the first head_dim_v dims, each item's queries at the end of its own filled part; a failure
    names a known mistake the output matches (the latent's scale, the RoPE part dropped, top-left
    causal alignment)."""
    q, cache, out, cmp = _linear_call(target, cfg)
    if not cmp.ok:
        raise AssertionError(f"mla_decode (lengths {list(cfg.lengths)}, {cfg.lq} new token(s), causal={cfg.causal}, "
                             f"Dc={cfg.dc}, Dr={cfg.dr}, head_dim_v={cfg.dv}) differs from the float64 reference: "
                             f"{cmp.describe()}{_diagnosis(cfg, q, cache, out)}")


def check_absorbed(target, cfg: AbsorbConfig):
    """DeepSeek's attention before absorption -- keys [W_UK c ; k_pe] and values W_UV c per head, scale
    (d_nope + Dr)^-0.5 passed explicitly, as DeepSeek-V3 does -- equals the target's call on the absorbed
    query [W_UK^T q_nope ; q_pe] and the latent cache [c ; k_pe], its latent output projected by W_UV
    (the error yardstick: the same absorbed math in the input dtype, projected)."""
    t, dtype = cfg.tensors(), cfg.torch_dtype
    scale = default_scale(cfg.d_nope, cfg.dr)
    q = absorb(t["q_nope"], t["q_pe"], t["w_uk"]).to(dtype)
    cache = torch.cat([t["c_kv"], t["k_pe"]], dim=-1)[:, :, None].to(dtype)  # (B, S, 1, Dc + Dr)
    seqlens = torch.tensor(cfg.lengths, dtype=torch.int32)
    out = call_mla(target, q.to(target.device), cache.to(target.device), seqlens.to(target.device), cfg.dc,
                   scale=scale, causal=True)
    project = lambda lat: torch.einsum("blhc,hvc->blhv", lat.double(), t["w_uv"])  # noqa: E731
    truth = unabsorbed_math(t["q_nope"], t["q_pe"], t["c_kv"], t["k_pe"], t["w_uk"], t["w_uv"], seqlens, scale)
    naive = project(mla_math(q, cache, seqlens, cfg.dc, scale=scale, compute_dtype=dtype).to(dtype))
    cmp = tolerance.compare(project(out.cpu()), truth, naive, dtype=dtype)
    if not cmp.ok:
        latent = tolerance.compare(out.cpu(), mla_math(q, cache, seqlens, cfg.dc, scale=scale), dtype=dtype,
                                   naive=mla_math(q, cache, seqlens, cfg.dc, scale=scale, compute_dtype=dtype))
        default = mla_math(q, cache, seqlens, cfg.dc)
        hint = ("; the latent output equals the call with the default scale D^-0.5: the explicit scale "
                f"{scale:.4g} was ignored") if tolerance.compare(out.cpu(), default, dtype=dtype).ok else ""
        raise AssertionError(f"DeepSeek's attention (Hq={cfg.hq}, d_nope={cfg.d_nope}, Dr={cfg.dr}, Dc={cfg.dc}, "
                             f"d_v={cfg.d_v}, scale={scale:.4g}) computed before absorption differs from the absorbed "
                             f"call projected by W_UV: {cmp.describe()}\n  the latent output against the float64 "
                             f"reference: {'within' if latent.ok else 'outside'} the allowance{hint}")


def check_past_seqlen(target, cfg: MLAConfig):
    """Nothing past an item's cache_seqlens is read: those slots (the slack and the longer items' tail)
    hold +-1e4 (keys shrunk so raw scores stay below a quarter of the dtype's max) and the output still
    equals the float64 reference over the filled part."""
    q, cache = cfg.q(), cfg.cache()
    past = torch.arange(cfg.slots)[None, :] >= torch.tensor(cfg.lengths)[:, None]  # (B, slots)
    g = cfg.generator(salt=8)
    bad = extreme_like(cache[past], g).double()
    peak = float(q.double().abs().sum(-1).max()) * EXTREME  # (q.k before any scale: eager kernels form it)
    shrink = min(1.0, torch.finfo(q.dtype).max / 4 / peak) if peak > 0 else 1.0
    poisoned = cache.clone()
    poisoned[past] = (bad * shrink).to(q.dtype)
    out = call_mla(target, q.to(target.device), poisoned.to(target.device), cfg.seqlens(target.device), cfg.dv,
                   causal=cfg.causal)
    ref, naive = _truth(cfg, q, cache)
    cmp = tolerance.compare(out, ref, naive, dtype=q.dtype)
    if not cmp.ok:
        raise AssertionError(f"the slots past each item's cache_seqlens {list(cfg.lengths)} (of {cfg.slots}) hold "
                             f"+-1e4 and changed the output: {cmp.describe()} (read past the filled part?)")


def check_paged(target, cfg: MLAConfig):
    """The same positions laid out in a paged pool (block_size 1 .. 64, pages in a random order, spare
    pages holding +-10) give the linear call's output to the policy's allowance: position p of item b
    is read from block block_table[b, p // block_size], slot p % block_size."""
    q, cache = cfg.q(), cfg.cache()
    table = cfg.block_table()
    spare = (extreme_like(torch.empty(cfg.D), cfg.generator(salt=9)) * 1e-3).to(q.dtype)
    pool = cfg.paged(cache, table, fill=spare)
    out = call_mla(target, q.to(target.device), pool.to(target.device), cfg.seqlens(target.device), cfg.dv,
                   block_table=table.to(target.device), causal=cfg.causal)
    ref, naive = _truth(cfg, q, cache)
    cmp = tolerance.compare(out, ref, naive, dtype=q.dtype)
    if not cmp.ok:
        raise AssertionError(f"a paged pool ({cfg.num_blocks} blocks of {cfg.block_size}, block_table "
                             f"{table.tolist()}) holding the linear cache's positions gives another output than "
                             f"the float64 reference of the linear call: {cmp.describe()}")


def check_kv_heads(target, cfg: MLAConfig):
    """Several latent heads shared GQA-style: query head h reads latent head h // (Hq / Hkv) (one call
    against the float64 reference; each latent head's keys differ)."""
    cmp = _linear_call(target, cfg)[3]
    if not cmp.ok:
        group = cfg.hq // cfg.hkv
        raise AssertionError(f"{cfg.hq} query heads over {cfg.hkv} latent heads (query head h reads latent head "
                             f"h // {group}) differ from the float64 reference: {cmp.describe()}")


@example(cfg=DECODE)
@example(cfg=MTP)
@given(cfg=mla_configs())
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@example(cfg=DEEPSEEK)
@given(cfg=absorb_configs())
def test_absorbed(target, cfg):
    run(target, check_absorbed, cfg)


@example(cfg=MTP)
@given(cfg=mla_configs(slack=st.integers(1, 9)))
def test_past_seqlen(target, cfg):
    run(target, check_past_seqlen, cfg)


@pytest.mark.uses("mla_paged")
@given(cfg=mla_configs(paged=True))
def test_paged(target, cfg):
    run(target, check_paged, cfg)


@pytest.mark.uses("mla_kv_heads")
@given(cfg=mla_configs(kv_heads=True))
def test_kv_heads(target, cfg):
    run(target, check_kv_heads, cfg)
