"""The backward of ``attention_varlen``: dq (total_q, Hq, E), dk (total_k, Hkv, E), dv (total_k, Hkv, Ev).

Each property runs the target's forward and backward in its worker with a random upstream gradient
dO (``suites.gradients.target_grads``) and compares with float64 autograd of
``reference.attention_varlen.varlen_math`` (attention run per sequence); allowed: ``K_GRAD`` x the
error of autograd through the same math in the input dtype (the scale on the scores or the query)
+ floor + C_TERMS u x the running-error magnitudes of each sequence's backward
(``suites.magnitudes.attention_grad_terms``). The structural property holds exactly: a sequence
whose queries get a zero upstream gradient gets dq = dk = dv = 0 bit for bit, whatever its
neighbours in the packed rows receive.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.suites import regimes
from harness.suites.regimes import covering
from harness.suites.kit import require_features, run
from harness.reference.attention_varlen import bounds, varlen_math, visible_keys
from harness.suites.gradients import assert_grads, assert_zero, autograd_of, target_grads, upstream, worst_each
from harness.suites.magnitudes import attention_grad_terms
from harness.suites.attention import configs as ac
from harness.suites.attention import varlen_helpers as vh

PROPERTY_PREFIX = "varlen_grad"
pytestmark = [pytest.mark.needs(vh.VARLEN), pytest.mark.uses("backward")]
NAMES = ("dq", "dk", "dv")
EXAMPLES = settings(max_examples=max(8, settings.default.max_examples // 3))


def _grads(target, cfg, q, k, v, g):
    require_features(target, *vh.features_of(cfg))
    args = vh.arguments(cfg, q, k, v)
    _, grads, _ = target_grads(target, target.lookup(vh.VARLEN), args, vh.options(cfg, q.device), (0, 1, 2), g)
    return grads


def _terms(cfg, q, k, v, g):
    """[dq, dk, dv] running-error magnitudes, sequence by sequence, in the packed layout."""
    cu_q, cu_k = cfg.cu_seqlens()
    out = [torch.zeros(t.shape, dtype=torch.float64) for t in (q, k, v)]
    for (qs, qe), (ks, ke) in zip(bounds(cu_q), bounds(cu_k)):
        if qe == qs or ke == ks:
            continue
        vis = visible_keys(qe - qs, ke - ks, cfg.causal, cfg.window or None)
        parts = [t.cpu().transpose(0, 1) for t in (q[qs:qe], k[ks:ke], v[ks:ke], g[qs:qe])]
        dq, dk, dv = attention_grad_terms(*parts, attn_mask=vis, enable_gqa=cfg.hq != cfg.hkv)
        out[0][qs:qe], out[1][ks:ke], out[2][ks:ke] = dq.transpose(0, 1), dk.transpose(0, 1), dv.transpose(0, 1)
    return out


def agree(grads, cfg, q, k, v, g, what: str) -> None:
    cu_q, cu_k = cfg.cu_seqlens()
    kw = dict(causal=cfg.causal, window=cfg.window or None)
    truth = autograd_of(lambda *t: varlen_math(*t, cu_q, cu_k, **kw), [t.double() for t in (q, k, v)], g.double())
    cands = [autograd_of(lambda *t, at=at: varlen_math(*t, cu_q, cu_k, compute_dtype=q.dtype, scale_at=at, **kw),
                         (q, k, v), g) for at in ("scores", "query")]
    assert_grads(NAMES, grads, truth, worst_each(truth, cands), q.dtype, what, terms=_terms(cfg, q, k, v, g))


def check_agreement(target, cfg):
    """dq, dk, dv of the packed call equal float64 autograd of attention run per sequence (causal
    with Lq != Lk per sequence, GQA and zero-length sequences drawn)."""
    q, k, v = cfg.qkv(target.device)
    g = upstream(cfg.out_shape(), cfg.torch_dtype, cfg.generator(salt=9), target.device)
    agree(_grads(target, cfg, q, k, v, g), cfg, q, k, v, g, f"({vh.describe(cfg)})")


def check_isolation(target, cfg):
    """Every other sequence gets a zero upstream gradient: its dq, dk and dv are exactly 0 (no
    gradient flows across sequences), and every gradient still matches autograd."""
    q, k, v = cfg.qkv(target.device)
    B = len(cfg.q_lens)
    quiet = {b for b in range(B) if b % 2 != cfg.seed % 2}
    cu_q, cu_k = cfg.cu_seqlens()
    rows_q, rows_k = vh.rows_of(cu_q, quiet, cfg.total_q), vh.rows_of(cu_k, quiet, cfg.total_k)
    g = upstream(cfg.out_shape(), cfg.torch_dtype, cfg.generator(salt=9), target.device)
    g = g * (~rows_q).to(g.dtype).to(g.device)[:, None, None]
    dq, dk, dv = _grads(target, cfg, q, k, v, g)
    what = f"{vh.describe(cfg)}: sequences {sorted(quiet)} have a zero upstream gradient"
    assert_zero(dq, rows_q, 0, f"dq of {what}")
    assert_zero(dk, rows_k, 0, f"dk of {what}")
    assert_zero(dv, rows_k, 0, f"dv of {what}")
    agree([dq, dk, dv], cfg, q, k, v, g, f"({what})")


_GRAD_LENGTHS = ac.equal_lengths((2, 4), 24)


@EXAMPLES
@given(cfg=ac.varlen_configs(gqa=False) | ac.varlen_configs(gqa=True, causal=st.just(True))
       | ac.varlen_configs(causal=st.just(True), distinct=True) | ac.varlen_configs(lengths=ac.zero_lengths()))
@covering(regimes.VARLEN_GRAD)
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@EXAMPLES
@given(cfg=ac.varlen_configs(lengths=_GRAD_LENGTHS))
@covering(regimes.VARLEN_GRAD)
def test_isolation(target, cfg):
    run(target, check_isolation, cfg)
