"""The differential checks of ``attention_varlen`` (its Case in ``suites/attention/specs.py``): packed attention
across targets, and packed against dense.

- ``attention_varlen`` (a ``Case``): every target's packed output on the same packed q, k, v and
  cu_seqlens (``CONFIGS``: causal or not, GQA, and causal with Lq != Lk per sequence);
- varlen against dense (``VS_DENSE``): every target's ``attention_varlen`` and every target's
  ``scaled_dot_product_attention`` run on each sequence alone ((1, Hq, Lq, E) slices, a bottom-right
  boolean mask when causal, ``enable_gqa``), the rows concatenated, held to each other. A library's
  varlen kernel and its dense one are two backends of one function. A row that sees no key (causal,
  Lq > Lk) is zeros in varlen's contract; SDPA's answer there is a convention of its own
  (``fully_masked_rows``), so those rows are taken as zeros from the dense side.

Yardstick: the per-sequence float64 reference and the naive same-dtype math of the packed suite
(``suites.attention.varlen_helpers``); two outputs may differ by twice the policy's allowance.

    q (total_q, Hq, E), k (total_k, Hkv, E), v (total_k, Hkv, Ev), cu_seqlens (B + 1,) -> (total_q, Hq, Ev)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.suites.kit import ImplementationError, expect_tensor, impl
from harness.reference.attention_varlen import bounds, visible_keys
from harness.suites.attention import varlen_helpers as vh
from harness.suites.attention.configs import varlen_configs

#: what both checks draw
CONFIGS = (varlen_configs(gqa=False) | varlen_configs(gqa=True)
           | varlen_configs(causal=st.just(True), distinct=True))
VS_DENSE = "attention_varlen vs dense"  # (no protocol name in the id: a -k of one name selects its check only)
SDPA = "scaled_dot_product_attention"


def calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("packed", vh.arguments(cfg, q, k, v), {"causal": cfg.causal})]


def judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = args[:3]
    allowed = 2 * tolerance.allowance(vh.truth(cfg, q, k, v), vh.naive(cfg, q, k, v), dtype=q.dtype)
    return (lambda out: _cpu(out)), allowed


def _cpu(out) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"returned {type(out).__name__}, expected a Tensor")
    return out.detach().cpu().to(torch.float64)


def dense_per_sequence(target, cfg, args) -> torch.Tensor:
    """The target's SDPA on each sequence alone, the rows packed again (total_q, Hq, Ev)."""
    q, k, v, cu_q, cu_k = args[:5]
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)
    sdpa = impl(target, SDPA)
    for (qs, qe), (ks, ke) in zip(bounds(cu_q.cpu()), bounds(cu_k.cpu())):
        if qe == qs or ke == ks:
            continue
        mask = visible_keys(qe - qs, ke - ks, True, None, device=q.device) if cfg.causal else None
        one = sdpa(*(t.transpose(0, 1)[None].contiguous() for t in (q[qs:qe], k[ks:ke], v[ks:ke])),
                   attn_mask=mask, enable_gqa=cfg.hq != cfg.hkv)
        one = expect_tensor(one, SDPA, (1, q.shape[1], qe - qs, v.shape[-1]), q.dtype, q.device)[0].transpose(0, 1)
        if mask is not None:  # (rows that see no key: zeros, varlen's contract; module doc)
            one = one.masked_fill(~mask.any(-1)[:, None, None], 0)
        out[qs:qe] = one
    return out


@dataclass(frozen=True)
class Role:
    """A target in one role (its packed or its dense function), named so in messages."""

    target: object
    name: str

    @property
    def spec(self) -> str:
        return f"{self.target.spec} ({self.name})"

    @property
    def conventions(self) -> dict[str, str]:
        return self.target.conventions


def packed_and_dense(packed: list, dense: list, cfg, args, kwargs) -> list:
    """[(role, [output])] of every target that returned: varlen first, then dense per sequence."""
    got = []
    for t in packed:
        try:
            got.append((Role(t, "attention_varlen"), [impl(t, vh.VARLEN)(*[a.clone() if isinstance(a, torch.Tensor)
                                                                           else a for a in args], **kwargs)]))
        except ImplementationError:
            continue
    for t in dense:
        if cfg.hq != cfg.hkv and "enable_gqa" in t.info.unsupported or cfg.causal and "attn_mask" in t.info.unsupported:
            continue
        try:
            got.append((Role(t, "SDPA per sequence"), [dense_per_sequence(t, cfg, args)]))
        except ImplementationError:
            continue
    return got
