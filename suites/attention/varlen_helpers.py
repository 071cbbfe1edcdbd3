"""Helpers of the packed-sequence suites (``test_varlen.py``, ``test_varlen_grad.py``): calling
``attention_varlen``, the float64 truth and the naive yardstick per sequence, and rewriting the
sequences a property does not look at."""
from __future__ import annotations

import torch

from harness.spec import tolerance
from harness.suites.kit import expect_tensor, impl, require_features
from harness.reference.attention_varlen import bounds, varlen_math
from harness.suites.attention.configs import VarlenConfig
from harness.suites.attention.helpers import EXTREME, extreme_like

VARLEN = "attention_varlen"


def features_of(cfg: VarlenConfig) -> list[str]:
    """The ``HARNESS_UNSUPPORTED`` features a call with ``cfg`` uses."""
    used = [f for f, on in (("is_causal", cfg.causal), ("enable_gqa", cfg.hq != cfg.hkv),
                            ("varlen_window", cfg.window > 0), ("softcap", cfg.softcap > 0),
                            ("sinks", cfg.sinks), ("varlen_chunked", cfg.chunk > 0)) if on]
    return used + [cfg.dtype]


def options(cfg: VarlenConfig, device) -> dict:
    """The keyword arguments beyond the tensors: only the options the configuration uses."""
    kw = {"causal": cfg.causal}
    if cfg.window:
        kw["window"] = cfg.window
    if cfg.softcap:
        kw["softcap"] = cfg.softcap
    if cfg.sinks:
        kw["sinks"] = cfg.sink_logits(device)
    if cfg.chunk:
        kw["chunk"] = cfg.chunk
    return kw


def arguments(cfg: VarlenConfig, q, k, v) -> tuple:
    """(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) as a caller passes them."""
    cu_q, cu_k = cfg.cu_seqlens(q.device)
    return q, k, v, cu_q, cu_k, max(cfg.q_lens, default=0), max(cfg.k_lens, default=0)


def call_varlen(target, cfg: VarlenConfig, q, k, v, **kw) -> torch.Tensor:
    """The target's ``attention_varlen`` on packed (q, k, v) with ``cfg``'s lengths and options
    (``kw`` overrides them); the output's shape, dtype and device checked."""
    require_features(target, *features_of(cfg))
    kw = {**options(cfg, q.device), **kw}
    out = impl(target, VARLEN)(*arguments(cfg, q, k, v), **kw)
    return expect_tensor(out, VARLEN, (q.shape[0], q.shape[1], v.shape[-1]), q.dtype, q.device)


def _math_kw(cfg: VarlenConfig, kw: dict) -> dict:
    out = {"causal": cfg.causal, "window": cfg.window or None, "softcap": cfg.softcap or None,
           "sinks": cfg.sink_logits() if cfg.sinks else None, "chunk": cfg.chunk or None}
    out.update(kw)
    return out


def truth(cfg: VarlenConfig, q, k, v, **kw) -> torch.Tensor:
    """float64 attention run per sequence (``reference.attention_varlen``), (total_q, Hq, Ev)."""
    cu_q, cu_k = cfg.cu_seqlens()
    return varlen_math(q.cpu(), k.cpu(), v.cpu(), cu_q, cu_k, **_math_kw(cfg, kw))


def naive_candidates(cfg: VarlenConfig, q, k, v, **kw) -> list[torch.Tensor]:
    """The same math in the input dtype, as a correct kernel may round it: the scale on the scores
    or on the query, and E summed in reverse order (as ``suites.attention.helpers.naive``)."""
    cu_q, cu_k = cfg.cu_seqlens()
    qc, kc, vc = q.cpu(), k.cpu(), v.cpu()
    kw = _math_kw(cfg, kw)
    cands = [varlen_math(qc, kc, vc, cu_q, cu_k, compute_dtype=q.dtype, scale_at=at, **kw)
             for at in ("scores", "query")]
    cands.append(varlen_math(qc.flip(-1), kc.flip(-1), vc, cu_q, cu_k, compute_dtype=q.dtype, **kw))
    return cands


def naive(cfg: VarlenConfig, q, k, v, **kw) -> torch.Tensor:
    """The policy's yardstick: of ``naive_candidates``, the one furthest from the truth."""
    return tolerance.worst_naive(truth(cfg, q, k, v, **kw), naive_candidates(cfg, q, k, v, **kw))


def agree(out, cfg: VarlenConfig, q, k, v, what: str, *, rows=None, **kw) -> tolerance.Comparison:
    """``out`` equals the per-sequence float64 truth under the tolerance policy (``rows``: only
    these rows of the packed output, a bool (total_q,))."""
    ref, cands, out = truth(cfg, q, k, v, **kw), naive_candidates(cfg, q, k, v, **kw), out.cpu()
    if rows is not None:  # (the yardstick chosen on these rows: the others may hold +-1e4)
        out, ref, cands = out[rows], ref[rows], [c[rows] for c in cands]
    return tolerance.assert_close(out, ref, tolerance.worst_naive(ref, cands), dtype=q.dtype, what=what)


def describe(cfg: VarlenConfig) -> str:
    return (f"q_lens {list(cfg.q_lens)}, k_lens {list(cfg.k_lens)}"
            + (", causal" if cfg.causal else "") + (f", window {cfg.window}" if cfg.window else "")
            + (f", chunk {cfg.chunk}" if cfg.chunk else ""))


def rows_of(cu, seqs, total: int) -> torch.Tensor:
    """bool (total,): the packed rows of the sequences ``seqs``."""
    mask = torch.zeros(total, dtype=torch.bool)
    for b, (s, e) in enumerate(bounds(cu)):
        if b in seqs:
            mask[s:e] = True
    return mask


def rewrite(cfg: VarlenConfig, q, k, v, seqs, g: torch.Generator):
    """Copies of q, k, v whose rows of the sequences ``seqs`` hold +-1e4, q and k shrunk together
    (if needed) so that no raw score q.k of any pair of rows, times max(scale, 1), passes a quarter
    of the dtype's max: a kernel may form scores before it masks them, and an overflow to inf there
    tests no masking (float16 only; values stay +-1e4)."""
    cu_q, cu_k = cfg.cu_seqlens()
    rq, rk = rows_of(cu_q, seqs, cfg.total_q), rows_of(cu_k, seqs, cfg.total_k)
    q2, k2, v2 = (t.clone().cpu() for t in (q, k, v))
    bad_q = extreme_like(q2[rq], g).double()
    bad_k = extreme_like(k2[rk], g).double()
    scale = max(1.0, 1.0 / q.shape[-1] ** 0.5)
    cap = torch.finfo(q.dtype).max / 4
    for _ in range(8):
        q64, k64 = q2.double(), k2.double()
        q64[rq], k64[rk] = bad_q, bad_k
        qa = q64.abs().amax(dim=(0, 1))   # (E,): the largest |q| per dim over rows and heads
        ka = k64.abs().amax(dim=(0, 1))
        peak = float((qa * ka).sum()) * scale  # an upper bound of every |q.k|
        if peak <= cap:
            break
        shrink = (cap / peak) ** 0.5
        bad_q, bad_k = bad_q * shrink, bad_k * shrink
    q2[rq], k2[rk] = bad_q.to(q.dtype), bad_k.to(k.dtype)
    v2[rk] = extreme_like(v2[rk], g)
    return tuple(t.to(q.device) for t in (q2, k2, v2))


__all__ = ["VARLEN", "EXTREME", "agree", "arguments", "call_varlen", "describe", "features_of", "naive",
           "naive_candidates", "options", "rewrite", "rows_of", "truth"]
