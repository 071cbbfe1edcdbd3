"""The latent-attention name in the suites that run across names: ``mla_decode``'s history
(``history.mla_decode``, judged by ``mla.agreement``: nothing of one call may stay for the next) and its
differential check (the session's targets held to each other on one call over ragged linear caches).

    q (B, Lq, Hq, Dc + Dr), kv_cache (B, Smax, Hkv, Dc + Dr), cache_seqlens (B,), out (B, Lq, Hq, Dv)
"""
from __future__ import annotations

from harness.reference.mla import mla_math
from harness.suites.consistency.differential import Case, as_float64, policy
from harness.suites.histories import History
from harness.suites.mla import test_mla as mla
from harness.suites.mla.configs import mla_configs

HISTORIES = (History(name="mla_decode", configs=mla_configs(), judge=mla.check_agreement),)


def _mla_calls(cfg, device):
    return [("ragged linear caches", (cfg.q(device), cfg.cache(device), cfg.seqlens(device), cfg.dv),
             {"causal": cfg.causal})]


def _mla_judge(cfg, label, args, kwargs, out_dtype):
    q, cache, seqlens, dv = (a.cpu() if hasattr(a, "cpu") else a for a in args)
    truth = mla_math(q, cache, seqlens, dv, causal=kwargs["causal"])
    naive = mla_math(q, cache, seqlens, dv, causal=kwargs["causal"], compute_dtype=q.dtype)
    return as_float64, policy(truth, naive, q.dtype)


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {"mla_decode": Case(mla_configs(), _mla_calls, _mla_judge)}
