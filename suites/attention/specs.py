"""The attention names in the suites that run across names: their histories (``history.<name>``,
``suites/test_history.py``) and their differential checks (``scaled_dot_product_attention``,
``sliding_window_attention``, ``chunked_attention``, ``attention_varlen``: the session's targets held to each other on the
same inputs; ``suites/consistency/``).

    shape notation: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev)
"""
from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from harness.spec.configs import HistoryConfig
from harness.reference.chunked_attention import chunked_attention_math
from harness.reference.sliding_window import sliding_window_math
from harness.suites.attention import test_attention as attention, test_sliding_window as sliding_window, test_varlen as varlen_suite
from harness.suites.attention import test_chunked_attention as chunked
from harness.suites.attention.configs import VarlenConfig, attn_configs, chunk_configs, varlen_configs, window_configs
from harness.suites.attention.helpers import naive as attention_naive
from harness.suites.attention.helpers import truth as attention_truth
from harness.suites.consistency import varlen
from harness.suites.consistency.differential import Case, as_float64, policy
from harness.suites.histories import History


# ---- histories ------------------------------------------------------------------------------------

@st.composite
def _split(draw, total: int, parts: int) -> tuple[int, ...]:
    """``total`` tokens split into ``parts`` sequences of at least one token each."""
    cuts = draw(st.lists(st.integers(1, total - 1), min_size=parts - 1, max_size=parts - 1, unique=True)) \
        if parts > 1 else []
    bounds = [0, *sorted(cuts), total]
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


@st.composite
def _split_anew(draw, first: VarlenConfig) -> VarlenConfig:
    """``first``'s tokens split into 1-4 other sequences: the same total_q and total_k, heads and dtype
    (where a mask or index cache keyed on the packed shape is hit); keys split as the queries where
    they were equal."""
    parts = draw(st.integers(1, min(4, first.total_q, first.total_k)))
    q_lens = draw(_split(first.total_q, parts))
    k_lens = q_lens if first.k_lens == first.q_lens else draw(_split(first.total_k, parts))
    return dataclasses.replace(first, q_lens=q_lens, k_lens=k_lens, seed=draw(st.integers(0, 2**31)))


_VARLEN = VarlenConfig(q_lens=(3, 5), k_lens=(3, 5), hq=2, hkv=2, E=8, Ev=8, dtype="float32", seed=1, causal=True)
#: the same packed shape split the other way round, then the first call again (run first on every profile)
VARLEN_HISTORY = HistoryConfig(name="attention_varlen", calls=tuple(c.to_json() for c in (
    _VARLEN, dataclasses.replace(_VARLEN, q_lens=(5, 3), k_lens=(5, 3), seed=2))))

HISTORIES = (
    History(name="scaled_dot_product_attention", configs=attn_configs(), judge=attention.check_agreement,
            keep=(("hq", "hkv", "E", "Ev"), "dtype")),
    History(name="sliding_window_attention", configs=window_configs(), judge=sliding_window.check_window_agreement,
            keep=("window", "dtype"), vary=("window",)),
    History(name="chunked_attention", configs=chunk_configs(), judge=chunked.check_agreement,
            keep=("chunk", "dtype"), vary=("chunk",)),
    History(name="attention_varlen", configs=varlen_configs(), judge=varlen_suite.check_agreement,
            keep=(("hq", "hkv", "E", "Ev"), "dtype"), variant=_split_anew, explicit=(VARLEN_HISTORY,),
            others=" (half of them the first call's tokens split into other sequences)"),
)


# ---- differential checks ----------------------------------------------------------------------------

def _sdpa_calls(cfg, device):
    q, k, v = cfg.qkv(device)
    return [("plain", (q, k, v), {}), ("is_causal=True", (q, k, v), {"is_causal": True})]


def _sdpa_judge(cfg, label, args, kwargs, out_dtype):
    q, k, v = args  # the attention suites' yardstick: the worst of the three scale placements
    return as_float64, policy(attention_truth(q, k, v, **kwargs), attention_naive(q, k, v, **kwargs), q.dtype)


def _masked(math, param: str):
    """(calls, judge) of a name called ``(q, k, v, cfg.<param>)`` at the default scale, held to
    ``math(q, k, v, cfg.<param>)`` (float64 truth, the same in the input dtype the yardstick):
    ``sliding_window_attention`` (window), ``chunked_attention`` (chunk)."""
    def calls(cfg, device):
        q, k, v = cfg.qkv(device)
        return [("default scale", (q, k, v, getattr(cfg, param)), {})]

    def judge(cfg, label, args, kwargs, out_dtype):
        q, k, v = (t.cpu() for t in args[:3])
        truth = math(q, k, v, getattr(cfg, param))
        return as_float64, policy(truth, math(q, k, v, getattr(cfg, param), compute_dtype=q.dtype), q.dtype)

    return calls, judge


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "scaled_dot_product_attention": Case(attn_configs(), _sdpa_calls, _sdpa_judge),
    "sliding_window_attention": Case(window_configs(), *_masked(sliding_window_math, "window")),
    "chunked_attention": Case(chunk_configs(), *_masked(chunked_attention_math, "chunk")),
    "attention_varlen": Case(varlen.CONFIGS, varlen.calls, varlen.judge),
}
